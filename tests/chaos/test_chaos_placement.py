"""Scenarios 22-23: placement under change. A worker restarts with other labels between
claims, and an owner's share changes in the middle of a job; real worker processes, the
history checker as everywhere (nothing lost, nothing committed twice, no stale commit)."""

from __future__ import annotations

import signal
import time

import pytest
from novatests.chaos.fleet import no_tracebacks
from novatests.chaos.history import check, invariants

from nova_queue import TaskSpec, shares
from nova_queue.local import wait_for
from nova_queue.stores import open_store

pytestmark = pytest.mark.slow

PARAMS = {"size": 64, "seconds": 0.1}


def finished(nova, job):
    st = nova.job(job, with_tasks=False)
    return st if st.finished else None


def test_a_worker_restarted_with_other_labels(fleet, nova_chaos, record):
    """Scenario 22: "flip" serves a site=lab job; it is stopped mid-job and comes back as
    site=home, which the job's requirement rules out: the rest runs on "lab" only."""
    started = time.monotonic()
    nova = nova_chaos
    job = nova.enqueue("synthetic", [TaskSpec(f"t{i}", 0.1) for i in range(24)], params=PARAMS,
                       requires=["site=lab"])
    flip = fleet.start("flip", "--no-benchmark", "--label", "site=lab")
    wait_for(lambda: nova.job(job, with_tasks=False).done >= 4, timeout_s=60,
             message="flip to run a few tasks")
    flip.signal(signal.SIGTERM)
    assert flip.wait(30) == 0
    done_by_flip = nova.job(job, with_tasks=False).done
    again = fleet.start("flip2", "--no-benchmark", "--label", "site=home")
    lab = fleet.start("lab", "--no-benchmark", "--label", "site=lab")
    wait_for(lambda: finished(nova, job), timeout_s=120, message="the job to finish")
    names = {w.worker_id: w.name for w in nova.workers()}
    by = [names.get(t.worker_id) for t in nova.job(job).tasks]
    assert "flip2" not in by and by.count("flip") == done_by_flip
    for p in (again, lab):
        p.signal(signal.SIGTERM)
    assert [p.wait(30) for p in (again, lab)] == [0, 0]
    no_tracebacks([flip, again, lab])
    verdict = check(nova, [job], store=open_store(fleet.store_url), expect="done")
    assert not invariants(nova, [job])
    record(22, verdict, started)


def test_an_owners_share_changes_mid_job(fleet, nova_chaos, record):
    """Scenario 23: two owners' jobs share two workers; bob's share goes from 1 to 4 half-way:
    bob's tasks then come about four times as often; both jobs finish intact."""
    started = time.monotonic()
    nova = nova_chaos
    procs = [fleet.start(f"w{i}", "--no-benchmark") for i in range(2)]
    wait_for(lambda: len(nova.eligible_workers("synthetic")) == 2, timeout_s=60,
             message="both workers")
    jobs = {o: nova.enqueue("synthetic", [TaskSpec(f"{o} {i}", 0.1) for i in range(40)],
                            params=PARAMS, owner=o) for o in ("alice", "bob")}
    wait_for(lambda: sum(nova.job(j, with_tasks=False).done for j in jobs.values()) >= 16,
             timeout_s=60, message="a third of the work")
    shares.set_share(nova, "bob", 4)
    switch = nova.last_event_id()
    wait_for(lambda: all(finished(nova, j) for j in jobs.values()), timeout_s=120,
             message="both jobs")
    while_both = []  # completions after the switch, until the first job finished
    for e in nova.events(switch, count=100_000):
        if e.type == "job_finished":
            break
        if e.type == "completed":
            while_both.append(e.fields["job"])
    bob, alice = while_both.count(jobs["bob"]), while_both.count(jobs["alice"])
    assert bob > 2 * alice, (bob, alice)  # 4 : 1 by share, loosely: usage decays slowly
    for p in procs:
        p.signal(signal.SIGTERM)
    assert [p.wait(30) for p in procs] == [0, 0]
    no_tracebacks(procs)
    verdict = check(nova, list(jobs.values()), store=open_store(fleet.store_url), expect="done")
    assert not invariants(nova, list(jobs.values()))
    record(23, verdict, started)
