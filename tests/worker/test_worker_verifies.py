"""A real worker (in-process, a real Redis, the synthetic app) verifies what a worker that is
not trusted committed: it re-runs each held result, reads the candidate (from the store, or
held in Redis when small) and compares it with the app's ``same_result``. A right card
stands, verified by it; a forged card and bytes that are no card at all are mismatches: the
maker is quarantined and the verifier's own result stands (docs/SECURITY.md)."""

from __future__ import annotations

import threading

import pytest
from novatests.leases import backdate, rkey
from novatests.seed import set_speed
from novatests.web import StandInWorker

from nova_queue import TaskSpec
from nova_queue.local import wait_for
from nova_queue.settings import Settings
from nova_queue.stores import open_store
from nova_queue.workers.runtime import Worker, WorkerOptions

pytestmark = pytest.mark.timeout(120)


def test_a_worker_verifies_held_results_with_the_apps_comparison(nova, redis_url, namespace,
                                                                   tmp_path):
    store_url = (tmp_path / "store").as_uri()
    store = open_store(store_url)
    job = nova.enqueue("synthetic", [TaskSpec(f"t{i}", 0.01) for i in range(3)],
                       params={"seconds": 0.01, "size": 64})
    maker = StandInWorker(nova, store, "tok.aaaaaaaaaaaa", name="maker", trust="new")
    set_speed(nova, "tok.aaaaaaaaaaaa", "synthetic", 0.01)
    leases = maker.claim(3)
    assert len(leases) == 3
    settings = Settings(redis_url=redis_url, namespace=namespace, home=str(tmp_path / "v"),
                        store_url=store_url)
    worker = Worker(settings, WorkerOptions(apps=("synthetic",), name="checker",
                                            benchmark=False, device_score_s=0))
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: any(w.name == "checker" and w.alive for w in nova.workers()),
                 timeout_s=60, message="the verifier to register")
        right = maker.finish(leases[0])  # a right card (in the store)
        maker.finish(leases[1], inline=True)  # a right card, held in Redis
        junk = rkey(leases[2])
        store.put(junk, b"no card at all", "image/png", {"job": job})
        nova.complete("tok.aaaaaaaaaaaa", leases[2], junk, run_s=0.05, warm=True)
        wait_for(lambda: nova.job(job, with_tasks=False).finished, timeout_s=60,
                 message="the job to finish")
    finally:
        worker.stop()
        thread.join(30)
    tasks = nova.job(job).tasks
    assert [t.state for t in tasks] == ["done"] * 3
    assert (tasks[0].result, tasks[0].worker_name, tasks[0].verified_by_name) == (
        right, "maker", "checker")
    assert (tasks[1].worker_name, tasks[1].verified_by_name) == ("maker", "checker")
    assert tasks[2].worker_name == "checker" and tasks[2].result != junk
    w = {x.name: x for x in nova.workers()}["maker"]
    assert w.quarantined and w.mismatches == 1 and w.verified == 2


def test_a_workers_backup_run_verifies_the_result_committed_first(nova, redis_url, namespace,
                                                                   tmp_path):
    """A real worker backs up a new worker's overdue task; the new worker commits a right
    card while the backup runs: the backup's run finds the candidate before it commits,
    compares, and the card stands, verified by it (a free sample: no re-run)."""
    store_url = (tmp_path / "store").as_uri()
    store = open_store(store_url)
    job = nova.enqueue("synthetic", [TaskSpec("t0", 1.0)], params={"seconds": 0.5, "size": 64})
    maker = StandInWorker(nova, store, "tok.aaaaaaaaaaaa", name="maker", trust="new")
    set_speed(nova, "tok.aaaaaaaaaaaa", "synthetic", 0.5)
    [lease] = maker.claim(1)
    backdate(nova, lease.task_id, 60_000)  # far past its 0.5 s prediction: worth a backup
    settings = Settings(redis_url=redis_url, namespace=namespace, home=str(tmp_path / "v"),
                        store_url=store_url)
    # its backup run takes 5 s (10x slowdown): the maker's 0.5 s run commits first
    worker = Worker(settings, WorkerOptions(apps=("synthetic",), name="checker",
                                            benchmark=False, device_score_s=0, slowdown=10))
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        checker = wait_for(lambda: next((w.worker_id for w in nova.workers()
                                         if w.name == "checker" and w.alive), None),
                           timeout_s=60, message="the verifier to register")
        set_speed(nova, checker, "synthetic", 0.01)
        wait_for(lambda: nova.redis.hget(nova.keys.task(lease.task_id), "b_worker") == checker,
                 timeout_s=60, message="the worker to back the task up")
        right = maker.finish(lease)
        wait_for(lambda: nova.job(job, with_tasks=False).finished, timeout_s=60,
                 message="the job to finish")
    finally:
        worker.stop()
        thread.join(30)
    [task] = nova.job(job).tasks
    assert (task.state, task.result, task.worker_name, task.verified_by_name) == (
        "done", right, "maker", "checker")
    assert nova.redis.zcard(nova.keys.verify("synthetic")) == 0
    assert {x.name: x for x in nova.workers()}["maker"].verified == 1
