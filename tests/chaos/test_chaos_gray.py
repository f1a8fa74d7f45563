"""Scenarios 14-21: partial failures. A worker that fails everything, hangs with a live
heartbeat, turns 100x slower, joins late, fails every other task, meets a poison task,
returns a hung task's result late, or is stuck in native code; real worker processes, the
gray failure switched on through the synthetic app's control file (``-o control=PATH``)."""

from __future__ import annotations

import json
import signal
import time

import pytest
from novatests.chaos.fleet import no_tracebacks
from novatests.chaos.history import check, invariants

from nova_queue import TaskSpec
from nova_queue.keys import task_id
from nova_queue.local import wait_for
from nova_queue.stores import open_store

pytestmark = pytest.mark.slow

PARAMS = {"size": 64}


def finished(nova, job):
    st = nova.job(job, with_tasks=False)
    return st if st.finished else None


def holding(nova, name):
    return {w.name: w.current for w in nova.workers() if w.alive}.get(name) or []


def control(tmp_path, name, **state):
    """The control file of worker ``name``; call again to change its failure mid-job."""
    path = tmp_path / f"{name}.control.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state))
    tmp.replace(path)  # atomic: the worker never reads half a file
    return path


def events(nova, *types):
    return [e for e in nova.events(count=100_000) if e.type in types]


def verify(nova, fleet, job, procs, *, expect="done"):
    for p in procs:
        if p.proc.poll() is None:
            p.signal(signal.SIGTERM)
    codes = [p.wait(60) for p in procs]
    no_tracebacks(procs)
    verdict = check(nova, [job], store=open_store(fleet.store_url), expect=expect)
    assert not invariants(nova, [job])
    return verdict, codes


def test_a_worker_that_fails_everything_fails_no_task(fleet, nova_chaos, record, tmp_path):
    """Scenario 14: every task fails at once on "broken" (a broken driver); it is
    quarantined, the attempts it used are given back, and "good" runs all 30."""
    started = time.monotonic()
    nova = nova_chaos
    broken = fleet.start("broken", "--no-benchmark", "-o",
                         f"control={control(tmp_path, 'broken', fail='all')}")
    good = fleet.start("good", "--no-benchmark")
    wait_for(lambda: len(nova.eligible_workers("synthetic")) == 2, timeout_s=60,
             message="both workers to join")
    job = nova.enqueue("synthetic", [TaskSpec(f"t{i}", 0.05) for i in range(30)],
                       params={**PARAMS, "seconds": 0.05}, max_attempts=3)
    wait_for(lambda: finished(nova, job), timeout_s=120, message="the job to finish")
    st = nova.job(job)
    assert (st.done, st.failed) == (30, 0), fleet.logs()
    w = {x.name: x for x in nova.workers()}["broken"]
    assert w.quarantined and "simulated broken device" in w.quarantine_reason
    assert all(t.worker_name == "good" for t in st.tasks)
    assert max(t.attempt_count for t in st.tasks) == 1  # its attempts did not count
    verdict, codes = verify(nova, fleet, job, [broken, good])
    assert codes == [0, 0]
    record(14, verdict, started)


def hang_ends(nova, wid):
    """The events that ended worker ``wid``'s attempts: its run deadline passed (requeued,
    kind timeout; or attempt_ended, kind timeout, when a backup of the task was running:
    the backup then runs on and commits as the task's only attempt, with no backup_won),
    or a backup committed first (backup_won, ``wid`` the loser)."""
    return [e for e in nova.events(count=100_000)
            if (e.type in ("requeued", "attempt_ended") and e.fields.get("kind") == "timeout"
                and e.fields.get("worker") == wid)
            or (e.type == "backup_won" and e.fields.get("loser") == wid)]


def test_a_hung_task_times_out_and_runs_elsewhere(fleet, nova_chaos, record, tmp_path):
    """Scenario 15: "hung" never returns from a task but its heartbeat lives. The task
    runs past its 3 s limit (or is backed up first), runs on "rescuer", and "hung" abandons
    it and goes on claiming: the hang is for its first task only (``times``; switching it
    off after the claim raced the worker reading its control file). "rescuer" joins before
    the job is enqueued, held back by an admin quarantine until "hung" holds its task, so
    it is in the fleet when that task times out (started after the claim, on a busy
    machine it often was not, and "hung" took the task again)."""
    started = time.monotonic()
    nova = nova_chaos
    ctl = control(tmp_path, "hung", hang="soft", times=1)
    hung = fleet.start("hung", "--no-benchmark", "-o", f"control={ctl}")
    rescuer = fleet.start("rescuer", "--no-benchmark")
    wait_for(lambda: len(nova.eligible_workers("synthetic")) == 2, timeout_s=60,
             message="both workers to join")
    ids = {w.name: w.worker_id for w in nova.workers()}
    assert nova.set_quarantine(ids["rescuer"], True, reason="held back",
                               cooldown_s=600) == "quarantined"  # no probe meanwhile
    job = nova.enqueue("synthetic", [TaskSpec(f"t{i}", 0.2) for i in range(6)],
                       params={**PARAMS, "seconds": 0.2}, timeout_s=3)
    wait_for(lambda: holding(nova, "hung"), timeout_s=30, message="hung to take a task")
    assert nova.set_quarantine(ids["rescuer"], False) == "released"
    wait_for(lambda: finished(nova, job), timeout_s=90, message="the job to finish")
    wait_for(lambda: "abandoned 1 task(s)" in hung.output(), timeout_s=30,
             message="hung to abandon its task")
    ends = hang_ends(nova, ids["hung"])
    trail = [(e.type, e.fields) for e in nova.events(count=100_000)]
    assert ends, trail
    for e in ends:  # the hung task (and any other task it lost) ran on "rescuer"
        assert nova.task(task_id(job, int(e.fields["task"]))).worker_name == "rescuer", trail
    rescuer.signal(signal.SIGTERM)  # before the next job: else it may take that task
    rescuer.wait(30)
    job2 = nova.enqueue("synthetic", [TaskSpec("after", 0.05)], params={**PARAMS,
                                                                      "seconds": 0.05})
    wait_for(lambda: finished(nova, job2), timeout_s=60, message="hung to work again")
    verdict, codes = verify(nova, fleet, job, [hung, rescuer])
    assert codes == [0, 0]
    assert nova.job(job2).tasks[0].worker_name == "hung"
    record(15, verdict, started)


def test_a_worker_that_turns_100x_slower_is_backed_up(fleet, nova_chaos, record, tmp_path):
    """Scenario 16: "throttled" turns 100x slower at half the job; the task it holds then
    is backed up by "steady" and committed long before it could finish there."""
    started = time.monotonic()
    nova = nova_chaos
    ctl = control(tmp_path, "throttled")
    procs = [fleet.start("throttled", "--no-benchmark", "-o", f"control={ctl}"),
             fleet.start("steady", "--no-benchmark")]
    wait_for(lambda: len(nova.eligible_workers("synthetic")) == 2, timeout_s=60,
             message="both workers")
    job = nova.enqueue("synthetic", [TaskSpec(f"t{i}", 0.2) for i in range(20)],
                       params={**PARAMS, "seconds": 0.2})
    wait_for(lambda: nova.job(job, with_tasks=False).done >= 10, timeout_s=60, message="half")
    control(tmp_path, "throttled", slowdown=100)  # its next task takes 20 s
    wait_for(lambda: finished(nova, job), timeout_s=120, message="the job to finish")
    won = events(nova, "backup_won")
    assert won and all(e.fields["loser"] != e.fields["worker"] for e in won)
    verdict, _ = verify(nova, fleet, job, procs)
    record(16, verdict, started)


def test_a_late_fast_worker_backs_up_the_slow_workers_task(fleet, nova_chaos, record):
    """Scenario 17: "slow" (80x) takes a task predicted at 64 s; "fast" joins, runs the rest,
    then backs the slow task up and wins. (The slow task is long so that the backup wins
    however long "fast" takes to start on a busy machine: at 16 s it once did not.)"""
    started = time.monotonic()
    nova = nova_chaos
    slow = fleet.start("slow", "--slowdown", "80")
    wait_for(lambda: nova.eligible_workers("synthetic"), timeout_s=60, message="slow to join")
    job = nova.enqueue("synthetic", [TaskSpec(f"t{i}", 0.8) for i in range(8)],
                       params={**PARAMS, "seconds": 0.8})
    wait_for(lambda: holding(nova, "slow"), timeout_s=30, message="slow to take a task")
    fast = fleet.start("fast", "--no-benchmark")
    wait_for(lambda: finished(nova, job), timeout_s=120, message="the job to finish")
    names = {w.worker_id: w.name for w in nova.workers()}
    assert [names[e.fields["worker"]] for e in events(nova, "backup_won")] == ["fast"]
    verdict, codes = verify(nova, fleet, job, [slow, fast])
    assert codes == [0, 0]
    record(17, verdict, started)


def test_a_flaky_worker_sinks_no_task(fleet, nova_chaos, record, tmp_path):
    """Scenario 18: "flaky" fails every other task; each failed task runs elsewhere next."""
    started = time.monotonic()
    nova = nova_chaos
    procs = [fleet.start("flaky", "--no-benchmark", "-o",
                         f"control={control(tmp_path, 'flaky', fail='every_other')}"),
             fleet.start("steady", "--no-benchmark")]
    job = nova.enqueue("synthetic", [TaskSpec(f"t{i}", 0.05) for i in range(24)],
                       params={**PARAMS, "seconds": 0.05}, max_attempts=2)
    wait_for(lambda: finished(nova, job), timeout_s=120, message="the job to finish")
    st = nova.job(job)
    assert (st.done, st.failed) == (24, 0)
    verdict, codes = verify(nova, fleet, job, procs)
    assert codes == [0, 0]
    record(18, verdict, started)


def test_a_poison_task_fails_and_benches_nobody(fleet, nova_chaos, record):
    """Scenario 19: one task fails on every worker: it ends failed after its 3 attempts
    (attempt 2 on the other worker), the rest finish, and neither worker is quarantined."""
    started = time.monotonic()
    nova = nova_chaos
    procs = [fleet.start(f"h{i}", "--no-benchmark") for i in range(2)]
    wait_for(lambda: len(nova.eligible_workers("synthetic")) == 2, timeout_s=60,
             message="both workers to join")
    prompts = [f"fine {i}" for i in range(8)] + ["POISON"]
    job = nova.enqueue("synthetic", [TaskSpec(p, 0.05) for p in prompts],
                       params={**PARAMS, "seconds": 0.05, "crash_on": "POISON"},
                       max_attempts=3)
    wait_for(lambda: finished(nova, job), timeout_s=90, message="the job to finish")
    st = nova.job(job)
    assert (st.state, st.done, st.failed) == ("done", 8, 1)
    assert set(st.tasks[8].failed_on) == {w.identity for w in nova.workers()}  # identities
    assert not any(w.quarantined for w in nova.workers())
    verdict, codes = verify(nova, fleet, job, procs, expect="terminal")
    assert codes == [0, 0]
    record(19, verdict, started)


def test_a_hung_tasks_late_result_is_stale(fleet, nova_chaos, record, tmp_path):
    """Scenario 20: "late" is deaf to its interrupt for 6 s (native code) on a task with a
    2 s limit; the task runs again under a newer lease (on "other", or on "late" itself
    when "other" is still starting as "late" comes back: a busy machine), and the result
    "late" returns from its first attempt is dropped or rejected: no object of that
    attempt stays in the store. The hang is for the first task only (``times``): switching
    it off after the claim raced the worker reading its control file."""
    started = time.monotonic()
    nova = nova_chaos
    ctl = control(tmp_path, "late", hang="hard", hang_s=6, times=1)
    late = fleet.start("late", "--no-benchmark", "-o", f"control={ctl}")
    wait_for(lambda: nova.eligible_workers("synthetic"), timeout_s=60, message="late to join")
    job = nova.enqueue("synthetic", [TaskSpec("only", 0.1)], params={**PARAMS, "seconds": 0.1},
                       timeout_s=2)
    wait_for(lambda: holding(nova, "late"), timeout_s=30, message="late to take it")
    tid = holding(nova, "late")[0]
    first = nova.task(tid)
    other = fleet.start("other", "--no-benchmark")
    wait_for(lambda: finished(nova, job), timeout_s=60, message="the job to finish")
    wait_for(lambda: "abandoned 1 task(s)" in late.output() or "dropping" in late.output()
             or events(nova, "stale_rejected"), timeout_s=30, message="the late result fenced")
    done = nova.task(tid)
    assert done.lease_gen > first.lease_gen and done.attempt_id != first.attempt_id
    assert done.worker_name in ("other", "late")
    store = open_store(fleet.store_url)
    keys = list(store.list(f"jobs/{job}/results/"))
    assert keys == [done.result], keys  # nothing of the late attempt
    verdict, codes = verify(nova, fleet, job, [late, other])
    assert codes == [0, 0]
    record(20, verdict, started)


def test_an_app_stuck_in_native_code_ends_the_worker_for_a_restart(fleet, nova_chaos, record,
                                                                   tmp_path):
    """Scenario 21: the app never returns and never sees its interrupt; 2 s after its task
    timed out the worker hands its leases back and exits 75 (its supervisor restarts it),
    and the task runs elsewhere."""
    started = time.monotonic()
    nova = nova_chaos
    stuck = fleet.start("stuck", "--no-benchmark", "-o",
                        f"control={control(tmp_path, 'stuck', hang='hard')}",
                        env={"NOVA_ABANDON_GRACE_S": "2"})
    wait_for(lambda: nova.eligible_workers("synthetic"), timeout_s=60, message="stuck to join")
    job = nova.enqueue("synthetic", [TaskSpec(f"t{i}", 0.1) for i in range(3)],
                       params={**PARAMS, "seconds": 0.1}, timeout_s=2)
    assert stuck.wait(60) == 75, stuck.output()[-3000:]
    assert "exiting with code 75" in stuck.output()
    assert {w.name: w.state for w in nova.workers()}["stuck"] == "stopped"
    other = fleet.start("other", "--no-benchmark")
    wait_for(lambda: finished(nova, job), timeout_s=60, message="the job to finish")
    verdict, codes = verify(nova, fleet, job, [stuck, other])
    assert codes == [75, 0]
    record(21, verdict, started)
