"""Task slots and abandonment: with ``--concurrency`` N, one slot's task loses its lease while
the other slots run on. The lost batch is dropped (its late result is never committed or
stored), the other slots commit their own results, and the worker claims again without
exiting. An in-process worker on a real Redis whose loop runs in the main thread and owns
it (``Abandoner.own_process``: SIGUSR1 interrupts it), as the CLI's does; the synthetic
runner is wrapped only to hold chosen tasks until the test lets them go, and a second
worker, driven here through the client, backs up the held task and commits first."""

from __future__ import annotations

import json
import signal
import threading

import pytest
from novatests.chaos.history import check, invariants
from novatests.leases import join, rkey
from novatests.slots import slot_worker_process

from nova_queue import NovaClient, TaskSpec
from nova_queue.local import wait_for
from nova_queue.settings import Settings
from nova_queue.stores import open_store
from nova_queue.workers.abandon import Abandoner
from nova_queue.workers.apps.synthetic import Control
from nova_queue.workers.runtime import Worker, WorkerOptions

PARAMS = {"seconds": 0.05, "size": 64}
#: every wait of the test ends by then, so a broken worker fails it instead of hanging it
DEADLINE_S = 60.0



class Gates:
    """Wraps the synthetic runner: a task whose prompt is held waits until released (or
    the deadline), then runs as usual; ``started`` records each task as it begins."""

    def __init__(self, runner, held: dict[str, threading.Event]):
        self.held, self.real = held, runner.run_batch
        self.started: list[str] = []
        self.returned: list[str] = []
        self.lock = threading.Lock()
        runner.run_batch = self.run_batch

    def run_batch(self, tasks):
        with self.lock:
            self.started += [t.input for t in tasks]
        for t in tasks:
            if t.input in self.held:
                self.held[t.input].wait(DEADLINE_S)
        try:
            return self.real(tasks)
        finally:
            with self.lock:
                self.returned += [t.input for t in tasks]


@pytest.fixture
def slot_worker(redis_url, namespace, tmp_path):
    """``make(concurrency)``: a set-up worker (short leases, 1 s abandon grace, exits
    recorded instead of taken), the test's client and store; the SIGUSR1 handler the worker
    installs in this process is put back after the test."""
    settings = Settings(redis_url=redis_url, namespace=namespace, home=str(tmp_path),
                        store_url=(tmp_path / "store").as_uri(), lease_ttl_s=2.0,
                        heartbeat_interval_s=0.5, abandon_grace_s=1.0)
    nova = NovaClient.from_settings(settings)
    previous = signal.getsignal(signal.SIGUSR1)
    made: list[Worker] = []

    def make(concurrency: int):
        worker = Worker(settings, WorkerOptions(apps=("synthetic",), benchmark=False,
                                                device_score_s=0, concurrency=concurrency))
        worker.exits = []
        worker.abandon = Abandoner(worker.client, settings.abandon_grace_s,
                                   exit=worker.exits.append)
        worker.setup()
        worker.abandon.own_process()
        # a measured speed (1 s per cost unit), as after its first tasks: claims fill the slots
        nova.redis.hset(nova.keys.worker(worker.worker_id),
                        mapping={"ema:synthetic": 1.0, "n:synthetic": 5})
        made.append(worker)
        return worker

    try:
        yield make, nova, open_store(settings.resolved_store_url)
    finally:
        for worker in made:
            worker.stop()
            worker._shutdown()
        signal.signal(signal.SIGUSR1, previous)
        nova.close()


def back_up(nova, store, tid: str) -> str:
    """A second, much faster worker backs up ``tid`` and commits its own result first;
    returns the key of that result."""
    wid = "backup00-0001"
    join(nova, wid)
    nova.redis.hset(nova.keys.worker(wid), mapping={"ema:synthetic": 0.001, "n:synthetic": 5})
    claimed = nova.claim(wid, "synthetic")
    assert claimed.status == "ok" and [x.task_id for x in claimed.leases] == [tid], claimed
    [lease] = claimed.leases
    key = rkey(lease)
    store.put(key, b"the backup's result", "image/png",
              {"job": lease.job_id, "task": tid, "attempt-id": lease.attempt_id})
    nova.complete(wid, lease, key, run_s=0.01, warm=True)
    return key


def drive(worker: Worker, steps) -> None:
    """Run the worker's loop here, in the main thread (SIGUSR1 interrupts it), while
    ``steps`` runs on a thread; the loop stops when ``steps`` ends, whatever happened."""
    failure: list[BaseException] = []

    def run_steps():
        try:
            steps()
        except BaseException as exc:  # noqa: BLE001 - raised again in the main thread
            failure.append(exc)
        finally:
            worker.stop()

    thread = threading.Thread(target=run_steps, daemon=True)
    thread.start()
    worker._loop()
    thread.join(DEADLINE_S)
    assert not thread.is_alive(), "the test's steps did not finish"
    if failure:
        raise failure[0]


@pytest.mark.slow  # about 4 s: two jobs, a lease lost on its TTL
def test_a_slot_whose_lease_is_superseded_is_dropped_while_the_others_commit(slot_worker):
    """Three slots: "hung" is backed up elsewhere and loses its lease while "b" and "c"
    still run; they commit their own results, the worker drops "hung" once they are done
    (without waiting for it: it is still hung) and runs the next job. The late result of
    "hung", when it comes, is neither committed nor stored."""
    make, nova, store = slot_worker
    worker = make(3)
    gates = {p: threading.Event() for p in ("hung", "b", "c")}
    app = Gates(worker.apps["synthetic"].runner, gates)
    # "hung" costs most: the backup worker's claim picks it (it saves the most time)
    job = nova.enqueue("synthetic", [TaskSpec("hung", 30.0), TaskSpec("b", 1.0),
                                     TaskSpec("c", 1.0)], params=PARAMS)
    hung_tid = f"{job}:0"
    seen: dict[str, object] = {}

    def steps():
        try:
            wait_for(lambda: len(app.started) == 3,
                     timeout_s=DEADLINE_S, message="the three tasks to run at once")
            seen["backup"] = back_up(nova, store, hung_tid)
            wait_for(lambda: hung_tid in worker.heartbeat.lost_ids(),
                     timeout_s=DEADLINE_S, message="the lease to be lost")
            assert worker.abandon.target is None  # "b" and "c" run on: nothing abandoned
            gates["b"].set()
            gates["c"].set()
            wait_for(lambda: nova.job(job, with_tasks=False).finished,
                     timeout_s=DEADLINE_S, message="the job to finish")
            job2 = nova.enqueue("synthetic", [TaskSpec(f"n{i}", 1.0) for i in range(4)],
                                params=PARAMS)
            seen["job2"] = job2
            wait_for(lambda: nova.job(job2, with_tasks=False).finished,
                     timeout_s=DEADLINE_S / 2,  # while "hung" is still held
                     message="the next job to finish")
            assert "hung" not in app.returned  # the worker did not wait for it
        finally:
            gates["hung"].set()  # the late result
        wait_for(lambda: "hung" in app.returned,
                 timeout_s=DEADLINE_S, message="the hung task to return")

    drive(worker, steps)
    st = nova.job(job)
    assert (st.state, st.done) == ("done", 3)
    hung, b, c = st.tasks
    assert hung.result == seen["backup"] and hung.worker_id == "backup00-0001"
    assert {b.worker_id, c.worker_id} == {worker.worker_id}
    assert b.attempt_count == c.attempt_count == 1
    keys = sorted(store.list(f"jobs/{job}/results/"))
    assert keys == sorted([hung.result, b.result, c.result]), keys  # no late object
    assert store.get(hung.result).data == b"the backup's result"
    st2 = nova.job(seen["job2"])
    assert st2.state == "done"
    assert {t.worker_id for t in st2.tasks} == {worker.worker_id}
    verdict = check(nova, [job, seen["job2"]], store=store)
    assert verdict.ok, verdict.summary()
    assert not invariants(nova, [job, seen["job2"]])
    assert worker.exits == []
    assert nova.redis.scard(nova.keys.held(worker.worker_id)) == 0


def test_a_batch_dropped_by_one_worker_is_that_workers_alone(slot_worker):
    """Two workers in one program: a slot of "busy" still runs a dropped batch (its lease
    was superseded, its app is held) when "idle" shuts down. "idle" has dropped nothing,
    so it does not exit 75 for that slot (the dropped batches are each worker's
    abandonment's, not the process's)."""
    make, nova, store = slot_worker
    busy, idle = make(2), make(2)
    gates = {p: threading.Event() for p in ("hung", "b")}
    app = Gates(busy.apps["synthetic"].runner, gates)
    job = nova.enqueue("synthetic", [TaskSpec("hung", 30.0), TaskSpec("b", 1.0)],
                       params=PARAMS)
    hung_tid = f"{job}:0"
    seen: dict[str, object] = {}

    def steps():
        try:
            wait_for(lambda: len(app.started) == 2,
                     timeout_s=DEADLINE_S, message="both tasks to run at once")
            back_up(nova, store, hung_tid)
            wait_for(lambda: hung_tid in busy.heartbeat.lost_ids(),
                     timeout_s=DEADLINE_S, message="the lease to be lost")
            gates["b"].set()
            wait_for(lambda: not busy.heartbeat.held(),
                     timeout_s=DEADLINE_S, message="busy to drop the superseded batch")
            assert "hung" not in app.returned  # its slot still runs it
            idle._shutdown()
            seen["idle_exits"] = list(idle.exits)
        finally:
            gates["hung"].set()
        wait_for(lambda: "hung" in app.returned,
                 timeout_s=DEADLINE_S, message="the hung task to return")

    drive(busy, steps)
    assert seen["idle_exits"] == [] and busy.exits == []
    st = nova.job(job)
    assert (st.state, st.done) == ("done", 2)
    assert st.tasks[0].worker_id == "backup00-0001" and st.tasks[1].worker_id == busy.worker_id


def test_a_finished_slots_result_is_committed_while_another_slot_still_runs(slot_worker):
    """Two slots: "quick" returns, "slow" is held. The worker commits "quick" within the
    hold time of a run's results (MAX_HOLD_S), not when "slow" returns."""
    make, nova, _ = slot_worker
    worker = make(2)
    gates = {"slow": threading.Event()}
    app = Gates(worker.apps["synthetic"].runner, gates)
    job = nova.enqueue("synthetic", [TaskSpec("slow", 1.0), TaskSpec("quick", 1.0)],
                       params=PARAMS)

    def steps():
        try:
            wait_for(lambda: len(app.started) == 2,
                     timeout_s=DEADLINE_S, message="both tasks to run at once")
            wait_for(lambda: nova.task(f"{job}:1").state == "done",
                     timeout_s=DEADLINE_S / 2, message="quick to be committed")
            assert "slow" not in app.returned and nova.task(f"{job}:0").state == "leased"
        finally:
            gates["slow"].set()
        wait_for(lambda: nova.job(job, with_tasks=False).finished,
                 timeout_s=DEADLINE_S, message="the job to finish")

    drive(worker, steps)
    st = nova.job(job)
    assert (st.state, st.done) == ("done", 2)
    assert {t.worker_id for t in st.tasks} == {worker.worker_id}
    verdict = check(nova, [job])
    assert verdict.ok, verdict.summary()


@pytest.mark.slow  # a real worker process
def test_a_hung_slot_that_times_out_does_not_end_a_worker_process(redis_url, namespace, tmp_path):
    """A real ``worker --concurrency 2`` process: its first task is deaf to the interrupt
    for 6 s (``hang: hard``, ``times: 1``), far past the task's 2 s limit and the 1 s abandon
    grace. The other slot's task commits, the hung one is abandoned and runs again, and
    the worker does not exit 75: the app only holds a slot thread, not the worker. It runs
    the next job, and once the late batch returned (and is discarded), exits 0 on SIGTERM."""
    with slot_worker_process(redis_url, namespace, tmp_path,
                             {"hang": "hard", "hang_s": 6, "times": 1}) as (proc, wid, nova,
                                                                           store_url):
        job = nova.enqueue("synthetic", [TaskSpec(f"t{i}", 0.05) for i in range(2)],
                           params=PARAMS, timeout_s=2)
        wait_for(lambda: nova.job(job, with_tasks=False).finished,
                 timeout_s=DEADLINE_S, message="the job to finish")
        assert "abandoned 1 task(s)" in proc.output(), proc.output()[-3000:]
        job2 = nova.enqueue("synthetic", [TaskSpec(f"n{i}", 0.05) for i in range(3)],
                            params=PARAMS)
        wait_for(lambda: nova.job(job2, with_tasks=False).finished,
                 timeout_s=DEADLINE_S, message="the next job to finish")
        assert proc.proc.poll() is None, proc.output()[-3000:]  # still running: no exit 75
        st = nova.job(job)
        assert st.state == "done" and sorted(t.attempt_count for t in st.tasks) == [1, 2]
        assert {t.worker_id for t in st.tasks} | {
            t.worker_id for t in nova.job(job2).tasks} == {wid}
        store = open_store(store_url)
        assert sorted(store.list(f"jobs/{job}/results/")) == sorted(t.result for t in st.tasks)
        verdict = check(nova, [job, job2], store=store)
        assert verdict.ok, verdict.summary()
        # its late return, before the stop: a slot still running then would mean exit 75
        wait_for(lambda: "a dropped batch of synthetic returned" in proc.output(),
                 timeout_s=DEADLINE_S, message="the hung task to return")
        proc.signal(signal.SIGTERM)
        assert proc.wait(30) == 0, proc.output()[-3000:]
        assert "exiting with code 75" not in proc.output()


def test_the_control_files_times_counts_tasks_that_start_at_once(tmp_path):
    """Slots start tasks at once: ``times: 1`` still applies to one of them only."""
    ctl = tmp_path / "control.json"
    ctl.write_text(json.dumps({"slowdown": 3, "times": 1}))
    control = Control(str(ctl))
    start, factors = threading.Barrier(8), []

    def one():
        start.wait(DEADLINE_S)
        factors.append(control.before_task())

    threads = [threading.Thread(target=one) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(DEADLINE_S)
    assert sorted(factors) == [1.0] * 7 + [3.0]
