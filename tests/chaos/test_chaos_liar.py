"""Scenarios 36-37: results from machines you do not control are verified. A worker that is
not trusted (NOVA_TRUST=new, as every gateway worker starts), honest for its first 15
tasks, then returns a well-formed card with a wrong answer for every task (its control
file's ``lie``: once caught, every result it committed unverified runs again, in
finished jobs too), beside a trusted one that verifies: the job ends with every result correct, the liar quarantined, and the
history checker finds no committed result of the liar from before it was caught standing
unverified (``forged``). An honest worker that is not trusted: its results are sampled,
agree, stand, and its record grows."""

from __future__ import annotations

import json
import time

import pytest
from novatests.chaos.fleet import stop_cleanly
from novatests.chaos.history import check, invariants

from nova_queue import TaskSpec
from nova_queue.apps.image_checks import png_text
from nova_queue.apps.synthetic import task_answer
from nova_queue.local import wait_for
from nova_queue.results import Results
from nova_queue.stores import open_store

pytestmark = pytest.mark.slow


def control(tmp_path, name, **state):
    path = tmp_path / f"{name}.control.json"
    path.write_text(json.dumps(state))
    return path


def job_of(nova, n: int, name: str) -> str:
    return nova.enqueue("synthetic", [TaskSpec(f"{name} {i}", 0.05) for i in range(n)],
                        params={"seconds": 0.05, "size": 64})


def wrong_answers(nova, fleet, job) -> list[str]:
    """The tasks of ``job`` whose final card does not carry the task's own answer."""
    results = Results(nova.redis, nova.keys, open_store(fleet.store_url))
    st = nova.job(job)
    return [t.task_id for t in st.tasks
            if png_text(results.get(t.result).data).get("answer") != task_answer(t.input)]


def test_a_liar_is_caught_and_none_of_its_results_survive(fleet, nova_chaos, record, tmp_path):
    """Jobs of 20 tasks, one after another, until the liar is caught (its results are
    sampled at 4 / (4 + agreements in a row) at least: it lies on every task after its first
    15, so 10 jobs miss it with a chance below 1e-6); then every job, the finished ones
    whose results it had committed unverified too, ends with correct results only."""
    started = time.monotonic()
    nova = nova_chaos
    liar = fleet.start("liar", "--no-benchmark", "-o",
                       f"control={control(tmp_path, 'liar', lie=1.0, honest_first=15)}",
                       env={"NOVA_TRUST": "new"})
    honest = fleet.start("honest", "--no-benchmark")
    wait_for(lambda: len(nova.eligible_workers("synthetic")) == 2, timeout_s=60,
             message=f"both workers to join\n{fleet.logs()}")
    jobs: list[str] = []
    for n in range(10):
        jobs.append(job_of(nova, 20, f"liar{n}"))
        wait_for(lambda: nova.job(jobs[-1], with_tasks=False).finished, timeout_s=120,
                 message=f"job {n} to finish\n{fleet.logs()}")
        if any(e.type == "mismatch" for e in nova.events(count=100_000)):
            break
    wait_for(lambda: all(nova.job(j, with_tasks=False).finished for j in jobs), timeout_s=120,
             message=f"the jobs to finish again\n{fleet.logs()}")
    w = {x.name: x for x in nova.workers()}["liar"]
    assert w.trust == "new" and w.mismatches >= 1, w
    for job in jobs:
        st = nova.job(job)
        assert (st.done, st.failed, st.verifying) == (20, 0, 0), fleet.logs()
        assert wrong_answers(nova, fleet, job) == []
    stop_cleanly([liar, honest])
    verdict = check(nova, jobs, store=open_store(fleet.store_url), expect="done")
    assert verdict.forged == 0 and verdict.verified >= 1, verdict.summary()
    assert not invariants(nova, jobs)
    record(36, verdict, started)


def test_an_honest_new_worker_is_verified_and_its_results_stand(fleet, nova_chaos, record,
                                                                 tmp_path):
    started = time.monotonic()
    nova = nova_chaos
    new = fleet.start("new", "--no-benchmark", env={"NOVA_TRUST": "new"})
    honest = fleet.start("honest", "--no-benchmark")
    wait_for(lambda: len(nova.eligible_workers("synthetic")) == 2, timeout_s=60,
             message=f"both workers to join\n{fleet.logs()}")
    job = job_of(nova, 30, "honest")
    wait_for(lambda: nova.job(job, with_tasks=False).finished, timeout_s=180,
             message=f"the job to finish\n{fleet.logs()}")
    st = nova.job(job)
    assert (st.done, st.failed) == (30, 0)
    assert wrong_answers(nova, fleet, job) == []
    w = {x.name: x for x in nova.workers()}["new"]
    assert not w.quarantined and w.mismatches == 0
    made = [t for t in st.tasks if t.worker_name == "new"]
    verified = [t for t in made if t.verified_by]
    assert made and verified and w.verified == len(verified), (len(made), w)
    stop_cleanly([new, honest])
    verdict = check(nova, [job], store=open_store(fleet.store_url), expect="done")
    assert not invariants(nova, [job])
    record(37, verdict, started)
