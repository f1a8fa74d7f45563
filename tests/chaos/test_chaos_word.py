"""Scenarios 31-33: a worker's word is not proof. Workers that lie to the pool through the
gateway, written by hand as an adversarial probe writes them, beside honest gateway workers
(real processes): a phantom that declares a benchmark of 1e-9 s and never claims, a token
that fails every task and says hello again (a fresh worker id) after each failure, and a
worker that hands every task back as an "infra" failure. Each job must finish with every
task done, and the history checker must find nothing lost, doubled, stale or leased twice."""

from __future__ import annotations

import threading
import time

import pytest
from novatests.chaos.fleet import stop_cleanly

from nova_queue import TaskSpec
from nova_queue.local import wait_for

pytestmark = pytest.mark.slow


def job_of(nova, n: int, seconds: float, name: str) -> str:
    return nova.enqueue("synthetic", [TaskSpec(f"{name} {i}", seconds) for i in range(n)],
                        params={"seconds": seconds, "size": 64})


def finished(nova, job):
    st = nova.job(job, with_tasks=False)
    return st if st.finished else None


def joined(nova, name: str) -> None:
    """Wait until the worker ``name`` is live and has claimed: the honest worker the liar
    lies beside (alone, a worker that fails everything rightly fails its tasks for good)."""
    wait_for(lambda: any(w.name == name and w.alive and (w.current or w.tasks_done)
                         for w in nova.workers()), timeout_s=60, message=f"{name} to claim")


class Loop(threading.Thread):
    """Runs ``step`` every ``interval_s`` until stopped (a lying client's life)."""

    def __init__(self, step, interval_s: float):
        super().__init__(daemon=True)
        self.step, self.interval_s, self.stopped = step, interval_s, threading.Event()
        self.errors: list[BaseException] = []

    def run(self) -> None:
        while not self.stopped.wait(self.interval_s):
            try:
                self.step()
            except Exception as exc:  # noqa: BLE001 - kept for the test to report
                self.errors.append(exc)

    def stop(self) -> None:
        self.stopped.set()
        self.join(30)


def test_a_phantom_fast_worker_stalls_nothing(pool, record):
    """Scenario 31: a token registers a benchmark of 1e-9 s and keeps its heartbeat, but
    never claims; every real worker used to wait for it (0 of 20 tasks in 40 s)."""
    started = time.monotonic()
    gw, nova = pool.gateway(), pool.nova
    phantom = pool.hand(gw, "phantom")
    phantom.hello(bench_s=1e-9)
    beat = Loop(phantom.renew, 0.5)
    beat.start()
    job = job_of(nova, 20, 0.1, "phantom")
    honest = [pool.worker(gw, f"honest{i}") for i in range(2)]
    try:
        wait_for(lambda: finished(nova, job), timeout_s=90, message=f"the job\n{pool.logs()}")
    finally:
        beat.stop()
    stop_cleanly(honest)
    verdict = pool.verdict(job)
    record(31, verdict, started)
    assert not beat.errors
    assert {t.worker_name for t in nova.tasks(job)} <= {"honest0", "honest1"}
    assert nova.job(job, with_tasks=False).done == 20


def test_a_token_that_fails_and_says_hello_again_fails_nothing(pool, record):
    """Scenario 32: a token fails every task it claims and calls hello again after each
    failure (a fresh worker id), beside an honest worker. It used to fail 4 of 6 tasks for
    good under 7 worker ids; its blame now follows the token: no task fails."""
    started = time.monotonic()
    gw, nova = pool.gateway(), pool.nova
    job = job_of(nova, 8, 0.3, "relier")
    honest = pool.worker(gw, "honest")
    joined(nova, "honest")
    liar = pool.hand(gw, "liar")
    ids = {liar.hello()}

    def fail_and_rejoin() -> None:
        for lease in liar.claim():
            liar.fail(lease, "error", "CUDA error: an illegal memory access")
            ids.add(liar.hello())

    lying, beat = Loop(fail_and_rejoin, 0.05), Loop(liar.renew, 0.5)
    lying.start()
    beat.start()
    try:
        wait_for(lambda: finished(nova, job), timeout_s=120, message=f"the job\n{pool.logs()}")
    finally:
        lying.stop()
        beat.stop()
    stop_cleanly([honest])
    verdict = pool.verdict(job)
    record(32, verdict, started)
    st = nova.job(job)
    assert (st.done, st.failed) == (8, 0), [(t.state, t.error) for t in st.tasks]
    assert not lying.errors, lying.errors[:3]
    assert len(ids) >= 2  # it did re-register
    failed_on = {w for t in st.tasks for w in t.failed_on}
    assert failed_on <= {"liar"}, failed_on  # one identity, whatever its worker ids


def test_an_infra_loop_holds_no_task(pool, record):
    """Scenario 33: a worker hands every task it claims back as an "infra" failure (no
    attempt used), beside an honest worker: past a few free hand-backs they count as its
    failures, so it is quarantined and every task is done by the honest one."""
    started = time.monotonic()
    gw, nova = pool.gateway(), pool.nova
    job = job_of(nova, 8, 0.3, "loop")
    honest = pool.worker(gw, "honest")
    joined(nova, "honest")
    liar = pool.hand(gw, "looper")
    liar.hello(bench_s=0.001)
    handed = []

    def hand_back() -> None:
        for lease in liar.claim():
            res = liar.fail(lease, "infra", "result store unavailable")
            handed.append(res.status_code)

    lying, beat = Loop(hand_back, 0.02), Loop(liar.renew, 0.5)
    lying.start()
    beat.start()
    try:
        wait_for(lambda: finished(nova, job), timeout_s=120, message=f"the job\n{pool.logs()}")
    finally:
        lying.stop()
        beat.stop()
    stop_cleanly([honest])
    verdict = pool.verdict(job)
    record(33, verdict, started)
    st = nova.job(job)
    assert (st.done, st.failed) == (8, 0)
    assert all(t.worker_name == "honest" for t in st.tasks)
    assert not lying.errors, lying.errors[:3]
    [me] = [w for w in nova.workers() if w.worker_id == liar.worker_id]
    assert me.quarantined and "too often (infra)" in me.quarantine_reason, (me, handed)
