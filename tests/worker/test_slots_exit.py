"""Task slots and shutdown: a real ``worker --concurrency 2`` process whose slot runs an app
that never returns (``hang: soft``: no signal reaches a slot thread) after its batch was
dropped, abandoned or stopped, is stopped with SIGTERM. The interpreter joins every pool
thread at exit, so before the fix such a worker never exited; now it hands its leases back
and exits with code 75 once ``NOVA_ABANDON_GRACE_S`` has passed since the drop."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest
from novatests.chaos.history import check, invariants
from novatests.leases import join, rkey
from novatests.procs import WorkerProc
from novatests.slots import slot_worker_process

from nova_queue import TaskSpec
from nova_queue.local import wait_for
from nova_queue.stores import open_store
from nova_queue.workers.abandon import EXIT_RESTART

pytestmark = pytest.mark.slow  # a real worker process each

PARAMS = {"seconds": 0.05, "size": 64}
#: every wait of the test ends by then, so a broken worker fails it instead of hanging it
DEADLINE_S = 60.0
#: a worker stopped with a stuck slot exits within this (about the 1 s grace when healthy)
EXIT_WITHIN_S = 30.0
STUCK = "task slot(s) still run an app"



@pytest.fixture
def hung_slot_worker(redis_url, namespace, tmp_path):
    """A ``worker --concurrency 2`` process whose first task hangs for good (``hang: soft``,
    ``times: 1``; 2 s leases, 1 s abandon grace), joined and with a measured speed; yields
    (process, its worker id, the test's client, the store)."""
    with slot_worker_process(redis_url, namespace, tmp_path,
                             {"hang": "soft", "times": 1}) as (proc, wid, nova, store_url):
        yield proc, wid, nova, open_store(store_url)


def stop(proc: WorkerProc) -> tuple[int, float]:
    """SIGTERM; the exit code and how long the exit took (fails if it takes too long)."""
    started = time.monotonic()
    proc.signal(signal.SIGTERM)
    try:
        code = proc.wait(EXIT_WITHIN_S)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the worker did not exit within {EXIT_WITHIN_S:.0f} s of "
                             f"SIGTERM:\n{proc.output()[-3000:]}") from None
    return code, time.monotonic() - started


def test_a_stopped_worker_whose_abandoned_slot_never_returns_exits_75(hung_slot_worker):
    """The hung task times out (2 s limit) and is abandoned; it runs again on the other
    slot and the job finishes, and so does the next job. On SIGTERM the worker, whose
    dropped slot thread still hangs, exits 75 by the end of the 1 s grace since the drop,
    its leases handed back, every task committed once."""
    proc, wid, nova, store = hung_slot_worker
    job = nova.enqueue("synthetic", [TaskSpec(f"t{i}", 0.05) for i in range(2)],
                       params=PARAMS, timeout_s=2)
    wait_for(lambda: nova.job(job, with_tasks=False).finished,
             timeout_s=DEADLINE_S, message="the job to finish")
    assert "abandoned 1 task(s)" in proc.output(), proc.output()[-3000:]
    job2 = nova.enqueue("synthetic", [TaskSpec(f"n{i}", 0.05) for i in range(3)],
                        params=PARAMS)
    wait_for(lambda: nova.job(job2, with_tasks=False).finished,
             timeout_s=DEADLINE_S, message="the next job to finish")
    assert proc.proc.poll() is None, proc.output()[-3000:]
    code, took_s = stop(proc)
    out = proc.output()
    assert code == EXIT_RESTART, out[-3000:]
    assert f"1 {STUCK}" in out and "a dropped batch of synthetic returned" not in out
    assert nova.redis.scard(nova.keys.held(wid)) == 0
    assert wid not in nova.eligible_workers("synthetic")
    st, st2 = nova.job(job), nova.job(job2)
    assert st.state == st2.state == "done"
    assert sorted(t.attempt_count for t in st.tasks) == [1, 2]
    assert [t.attempt_count for t in st2.tasks] == [1, 1, 1]
    assert sorted(store.list(f"jobs/{job}/results/")) == sorted(t.result for t in st.tasks)
    verdict = check(nova, [job, job2], store=store)
    assert verdict.ok, verdict.summary()
    assert not invariants(nova, [job, job2])
    print(f"exit {code} {took_s:.2f} s after SIGTERM")


def test_a_worker_stopped_while_a_slot_hangs_releases_it_and_exits_75(hung_slot_worker):
    """SIGTERM while one slot hangs (its lease still good) and the other's result is
    uploaded: that result is committed, the hung task's lease is handed back without using
    an attempt, and the worker exits 75 once the 1 s grace since the stop has passed. The
    task then runs elsewhere, once."""
    proc, wid, nova, store = hung_slot_worker
    job = nova.enqueue("synthetic", [TaskSpec(f"t{i}", 0.05) for i in range(2)],
                       params=PARAMS, timeout_s=300)
    wait_for(lambda: "control file: hanging (soft)" in proc.output(),
             timeout_s=DEADLINE_S, message="a slot to hang")
    wait_for(lambda: list(store.list(f"jobs/{job}/results/")),
             timeout_s=DEADLINE_S, message="the other slot's upload")
    code, took_s = stop(proc)
    assert code == EXIT_RESTART, proc.output()[-3000:]
    assert f"1 {STUCK}" in proc.output()
    assert took_s >= 0.9  # it waited the grace for the slot
    assert nova.redis.scard(nova.keys.held(wid)) == 0
    hung, other = sorted(nova.job(job).tasks, key=lambda t: t.state != "pending")
    assert (hung.state, hung.attempt_count) == ("pending", 0)
    assert (other.state, other.attempt_count, other.worker_id) == ("done", 1, wid)
    # another worker takes the released task and commits it
    join(nova, "other000-0001")
    claimed = nova.claim("other000-0001", "synthetic")
    assert claimed.status == "ok" and [x.task_id for x in claimed.leases] == [hung.task_id]
    [lease] = claimed.leases
    store.put(rkey(lease), b"png", "image/png",
              {"job": job, "task": hung.task_id, "attempt-id": lease.attempt_id})
    nova.complete("other000-0001", lease, rkey(lease), run_s=0.05, warm=True)
    st = nova.job(job)
    assert st.state == "done" and [t.attempt_count for t in st.tasks] == [1, 1]
    assert sorted(store.list(f"jobs/{job}/results/")) == sorted(t.result for t in st.tasks)
    verdict = check(nova, [job], store=store)
    assert verdict.ok, verdict.summary()
    assert not invariants(nova, [job])
    print(f"exit {code} {took_s:.2f} s after SIGTERM")
