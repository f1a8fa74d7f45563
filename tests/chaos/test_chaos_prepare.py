"""Scenarios 34-35: a worker that cannot prepare a job (a missing runtime or model, no
disk: the synthetic app's control file says ``{"prepare": "fail"}``; ``--no-benchmark``, so
no startup self-test drops the app first). It hands every task back without using an
attempt and is marked; alone, the job waits (saying why) and runs when a capable worker
joins; beside a capable one that looks 50x slower, the capable one is never told to wait
for it. Real worker processes, every run checked by the history checker."""

from __future__ import annotations

import json
import time

import pytest
from novatests.chaos.fleet import no_tracebacks, stop_cleanly
from novatests.chaos.history import check, invariants
from novatests.seed import set_speed

from nova_queue import TaskSpec
from nova_queue.local import wait_for
from nova_queue.stores import open_store

pytestmark = pytest.mark.slow

PARAMS = {"size": 64, "seconds": 0.05}


def unpreparable(tmp_path, name: str) -> str:
    path = tmp_path / f"{name}.control.json"
    path.write_text(json.dumps({"prepare": "fail"}))
    return f"control={path}"


def worker(nova, name: str):
    return {w.name: w for w in nova.workers() if w.alive}.get(name)


def finished(nova, job):
    st = nova.job(job, with_tasks=False)
    return st if st.finished else None


def checked(nova, fleet, job, procs):
    stop_cleanly(procs)
    no_tracebacks(procs)
    verdict = check(nova, [job], store=open_store(fleet.store_url), expect="done")
    assert not invariants(nova, [job])
    return verdict


def test_a_worker_that_cannot_prepare_alone_fails_no_task(fleet, nova_chaos, record,
                                                          tmp_path):
    """Scenario 34: "unable" is the only worker of a 20-task job: it hands back what it
    claimed (no attempt used), is marked, and claims no more of it; the job says why it
    waits, all 20 tasks pending. Then "capable" joins and runs all 20."""
    started = time.monotonic()
    nova = nova_chaos
    unable = fleet.start("unable", "--no-benchmark", "-o", unpreparable(tmp_path, "unable"))
    wait_for(lambda: nova.eligible_workers("synthetic"), timeout_s=60, message="unable to join")
    job = nova.enqueue("synthetic", [TaskSpec(f"t{i}", 0.05) for i in range(20)],
                       params=PARAMS, max_attempts=3)
    wait_for(lambda: (w := worker(nova, "unable")) and w.cannot_run, timeout_s=60,
             message="unable to be marked")
    wait_for(lambda: nova.job(job, with_tasks=False).leased == 0, timeout_s=30,
             message="every lease back")
    st = nova.job(job)
    assert (st.pending, st.failed, st.done) == (20, 0, 0), fleet.logs()
    assert max(t.attempt_count for t in st.tasks) == 0
    runners = nova.who_can_run("synthetic", (), "")
    assert runners.eligible == [] and [b.name for b in runners.blocked] == ["unable"]
    assert "simulated: this worker cannot prepare" in runners.blocked[0].mark.reason
    capable = fleet.start("capable", "--no-benchmark")
    wait_for(lambda: finished(nova, job), timeout_s=120, message="the job to finish")
    st = nova.job(job)
    assert (st.done, st.failed) == (20, 0)
    assert {t.worker_name for t in st.tasks} == {"capable"}
    assert max(t.attempt_count for t in st.tasks) == 1
    handed = [e for e in nova.events(count=100_000)
              if e.type == "requeued" and e.fields.get("kind") == "prepare"]
    assert handed and all(e.fields["attempt"] == "0" for e in handed)
    record(34, checked(nova, fleet, job, [unable, capable]), started)


def test_a_worker_that_cannot_prepare_beside_a_capable_one(fleet, nova_chaos, record,
                                                           tmp_path):
    """Scenario 35: "unable" looks 50x faster than "capable" (a seeded speed), so it takes
    the first tasks and capable would wait for it at the tail; once unable is marked its
    speed no longer counts: capable runs all 30, none failed, none waiting on unable."""
    started = time.monotonic()
    nova = nova_chaos
    procs = [fleet.start("unable", "--no-benchmark", "-o", unpreparable(tmp_path, "unable")),
             fleet.start("capable", "--no-benchmark")]
    wait_for(lambda: len(nova.eligible_workers("synthetic")) == 2, timeout_s=60,
             message="both workers to join")
    ids = {w.name: w.worker_id for w in nova.workers()}
    set_speed(nova, ids["unable"], "synthetic", 0.001)
    set_speed(nova, ids["capable"], "synthetic", 0.05)
    job = nova.enqueue("synthetic", [TaskSpec(f"t{i}", 0.05) for i in range(30)],
                       params=PARAMS, max_attempts=3)
    wait_for(lambda: finished(nova, job), timeout_s=120, message="the job to finish")
    st = nova.job(job)
    assert (st.done, st.failed) == (30, 0), procs[0].output()[-3000:]
    assert {t.worker_name for t in st.tasks} == {"capable"}
    assert worker(nova, "unable").cannot_run
    record(35, checked(nova, fleet, job, procs), started)
