"""Scenarios 1, 3 and 5: real worker processes killed, frozen, and fed a poison task."""

from __future__ import annotations

import os
import random
import signal
import time

import pytest
from novatests.chaos.fleet import LEASE_TTL_S, no_tracebacks, stop_cleanly
from novatests.chaos.history import check, invariants

from nova_queue import TaskSpec
from nova_queue.local import wait_for
from nova_queue.stores import open_store

pytestmark = pytest.mark.slow

#: Seed of the random kill schedule; set NOVA_CHAOS_SEED to replay a failing run.
SEED = int(os.environ.get("NOVA_CHAOS_SEED") or random.randrange(1 << 30))


def finished(nova, job):
    st = nova.job(job, with_tasks=False)
    return st if st.finished else None


def holders(nova) -> dict[str, list[str]]:
    """Worker name -> task ids it holds, for live workers holding something."""
    return {w.name: w.current for w in nova.workers() if w.alive and w.current}


def test_kill_9_workers_at_random_moments(fleet, nova_chaos, record):
    """Scenario 1: six kill -9s, each at a random moment of a running task; replacements join."""
    started = time.monotonic()
    rng = random.Random(SEED)
    nova = nova_chaos
    job = nova.enqueue("synthetic", [TaskSpec(f"task {i}", 0.15) for i in range(36)],
                       params={"seconds": 0.15, "size": 64})
    live = {f"w{i}": fleet.start(f"w{i}", "--no-benchmark") for i in range(3)}
    kills = 0
    deadline = time.monotonic() + 120
    while kills < 6 and not finished(nova, job):
        assert time.monotonic() < deadline, f"seed {SEED}\n{fleet.logs()}"
        busy = wait_for(lambda: sorted(set(holders(nova)) & set(live)) or finished(nova, job),
                        timeout_s=60, message="a running worker holding a lease")
        if not isinstance(busy, list):
            break
        victim = rng.choice(busy)
        # a random moment of the task's life: running, uploading, committing, claiming next
        time.sleep(rng.uniform(0.0, 0.25))
        live.pop(victim).signal(signal.SIGKILL)
        kills += 1
        name = f"r{kills}"
        live[name] = fleet.start(name, "--no-benchmark")
    wait_for(lambda: finished(nova, job), timeout_s=120, message=f"job to finish (seed {SEED})")
    stop_cleanly(live.values())
    verdict = check(nova, [job], store=open_store(fleet.store_url), expect="done")
    assert not invariants(nova, [job])
    record(1, verdict, started)
    # a killed worker's task comes back when its lease expires, or an idle worker backs it up
    assert kills >= 3 and verdict.requeued + verdict.backups >= 1, (kills, verdict.summary())


def test_worker_frozen_past_its_ttl_then_resumed(fleet, nova_chaos, record):
    """Scenario 3: SIGSTOP a worker mid-task; a rescuer takes over; the late result is fenced."""
    started = time.monotonic()
    nova = nova_chaos
    job = nova.enqueue("synthetic", [TaskSpec(f"frozen {i}", 1.0) for i in range(4)],
                       params={"seconds": 1.0, "size": 64})
    frozen = fleet.start("frozen", "--no-benchmark")
    tid = wait_for(lambda: holders(nova).get("frozen"), timeout_s=60, message="a lease")[0]
    first_gen = nova.task(tid).lease_gen
    os.kill(frozen.pid, signal.SIGSTOP)
    frozen_at = time.monotonic()
    rescuer = fleet.start("rescuer", "--no-benchmark")
    wait_for(lambda: finished(nova, job), timeout_s=90, message="the rescuer to finish")
    assert time.monotonic() - frozen_at > LEASE_TTL_S
    os.kill(frozen.pid, signal.SIGCONT)
    # the frozen worker finishes its run: its commit is rejected, or it learns first that
    # the lease was lost and drops the result, or abandons the run (its next renew says so)
    wait_for(lambda: any(e.type == "stale_rejected" for e in nova.events(count=100_000))
             or "dropping" in frozen.output() or "abandoned" in frozen.output(),
             timeout_s=30, message="the late result fenced")
    stop_cleanly([frozen, rescuer])
    t = nova.task(tid)
    assert t.state == "done" and t.worker_name == "rescuer" and t.lease_gen > first_gen
    verdict = check(nova, [job], store=open_store(fleet.store_url), expect="done")
    assert not invariants(nova, [job])
    record(3, verdict, started)


def test_frozen_alone_keeps_its_lease_through_the_quiet_window(fleet, nova_chaos, record):
    """Scenario 3b: frozen past its TTL with no other worker around. Nothing ran in the
    namespace meanwhile, so the first script after the freeze opens a grace window: the
    worker keeps its lease and its commit is the one and only result."""
    started = time.monotonic()
    nova = nova_chaos
    job = nova.enqueue("synthetic", [TaskSpec("alone", 1.0)], params={"seconds": 1.0,
                                                                     "size": 64})
    w = fleet.start("alone", "--no-benchmark")
    tid = wait_for(lambda: holders(nova).get("alone"), timeout_s=60, message="a lease")[0]
    os.kill(w.pid, signal.SIGSTOP)
    time.sleep(2 * LEASE_TTL_S)  # the fault: frozen for two lease TTLs
    os.kill(w.pid, signal.SIGCONT)
    wait_for(lambda: finished(nova, job), timeout_s=60, message="the job to finish")
    w.signal(signal.SIGTERM)
    assert w.wait(30) == 0
    no_tracebacks([w])
    verdict = check(nova, [job], store=open_store(fleet.store_url), expect="done")
    record(3, verdict, started)
    assert nova.task(tid).lease_gen == 1  # never re-leased: no false expiry
    assert any(e.type == "grace" for e in nova.events(count=100_000))


def test_poison_task_fails_after_max_attempts_and_the_job_finishes(fleet, nova_chaos, record):
    """Scenario 5: two poison tasks crash every time; the other ten finish, the job too."""
    started = time.monotonic()
    nova = nova_chaos
    prompts = [f"fine {i}" for i in range(10)] + ["POISON a", "POISON b"]
    job = nova.enqueue("synthetic", [TaskSpec(p, 0.05) for p in prompts],
                       params={"seconds": 0.05, "size": 64, "crash_on": "POISON"},
                       max_attempts=3)
    procs = [fleet.start(f"p{i}", "--no-benchmark", "--burst") for i in range(2)]
    assert [p.wait(90) for p in procs] == [0, 0], fleet.logs()
    no_tracebacks(procs)
    st = nova.job(job)
    assert (st.state, st.done, st.failed) == ("done", 10, 2)
    for t in st.tasks[10:]:
        assert (t.state, t.attempt_count) == ("failed", 3)
        assert "poison" in t.error.lower() and t.error_kind == "error"
    verdict = check(nova, [job], store=open_store(fleet.store_url))
    assert not invariants(nova, [job])
    record(5, verdict, started)
    fails = [e for e in nova.events(count=100_000)
             if e.type in ("requeued", "failed") and e.fields.get("kind") == "error"]
    assert len(fails) == 6  # 2 poison tasks x 3 attempts
