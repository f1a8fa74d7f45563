"""Scenario 10: the S3 result store (a private SeaweedFS server) is stopped mid-job. Uploads
fail, tasks are released as ``infra`` failures without using an attempt, workers pause;
once the server is back on the same ports the job completes, and every committed task
points at an object that exists."""

from __future__ import annotations

import time

import pytest
from novatests.chaos.fleet import Fleet, chaos_client, stop_cleanly
from novatests.chaos.history import check, invariants
from novatests.chaos.proxy import CutProxy
from novatests.s3 import SeaweedS3, use_dummy_credentials

from nova_queue import TaskSpec
from nova_queue.local import wait_for
from nova_queue.stores import open_store

pytestmark = [pytest.mark.slow, pytest.mark.s3]


@pytest.fixture
def own_s3(monkeypatch):
    """A SeaweedFS server of this test only (the session's one must stay up)."""
    use_dummy_credentials(monkeypatch)
    server = SeaweedS3().start()
    yield server
    server.close()


def _infra(nova) -> list:
    return [e for e in nova.events(count=100_000)
            if e.type == "requeued" and e.fields.get("kind") == "infra"]


def test_s3_down_mid_job_then_back(own_s3, redis_url, namespace, tmp_path, record):
    started = time.monotonic()
    store_url = f"s3://chaos-results/run?endpoint={own_s3.endpoint}"
    nova = chaos_client(redis_url, namespace)
    job = nova.enqueue("synthetic", [TaskSpec(f"s3 {i}", 0.1) for i in range(24)],
                       params={"seconds": 0.1, "size": 64})
    fleet = Fleet(redis_url, namespace, store_url, tmp_path / "homes")
    try:
        for i in range(2):
            fleet.start(f"s{i}", "--no-benchmark")
        # both workers running (a worker that cannot open the store at startup exits 1)
        wait_for(lambda: len([w for w in nova.workers() if w.alive]) == 2
                 and nova.job(job, with_tasks=False).done >= 4, timeout_s=60,
                 message="two workers running and 4 tasks done")
        own_s3.stop(kill=True)
        wait_for(lambda: len(_infra(nova)) >= 3, timeout_s=60,
                 message=f"uploads to fail as infra\n{fleet.logs()}")
        assert nova.job(job, with_tasks=False).failed == 0
        own_s3.start()
        wait_for(lambda: nova.job(job, with_tasks=False).finished, timeout_s=120,
                 message=f"job to finish once S3 is back\n{fleet.logs()}")
        stop_cleanly(fleet.procs)
        store = open_store(store_url)
        verdict = check(nova, [job], store=store, expect="done")  # every result object exists
        assert not invariants(nova, [job])
        record(10, verdict, started)
        st = nova.job(job)
        assert all(t.attempt_count == 1 for t in st.tasks), [t.attempt_count for t in st.tasks]
        assert all(store.get(t.result).content_type == "image/png" for t in st.tasks)
        assert any("store failed for" in p.output() for p in fleet.procs)
    finally:
        fleet.close()
        nova.close()


def test_store_failure_after_a_lost_put_reply_does_not_kill_the_worker(s3_server, redis_url,
                                                                       namespace, tmp_path):
    """The PUT of a result reaches S3 but its reply is lost; botocore's retry meets the
    existing object (412, write-once), so the worker checks the object with a HEAD, and
    that HEAD finds S3 unreachable for a few seconds."""
    proxy = CutProxy(s3_server.s3_port)
    proxy.arm(b"\x89PNG\r\n")  # the first result body: S3 stores it, the reply is lost
    proxy.arm(b"HEAD /", down_s=6.0)  # the write-once check: lost, then S3 unreachable
    store_url = f"s3://chaos-lost-put/run?endpoint=http://127.0.0.1:{proxy.port}"
    nova = chaos_client(redis_url, namespace)
    job = nova.enqueue("synthetic", [TaskSpec(f"put {i}", 0.05) for i in range(3)],
                       params={"seconds": 0.05, "size": 64})
    fleet = Fleet(redis_url, namespace, store_url, tmp_path / "homes")
    try:
        w = fleet.start("w", "--no-benchmark")
        wait_for(lambda: proxy.cuts == 2 or w.proc.poll() is not None, timeout_s=60,
                 message=f"both cuts\n{fleet.logs()}")
        wait_for(lambda: nova.job(job, with_tasks=False).finished or w.proc.poll() is not None,
                 timeout_s=60, message="the job to finish (or the worker to die)")
        assert w.proc.poll() is None, w.output()[-3000:]  # still running
        assert check(nova, [job], store=open_store(store_url), expect="done").ok
    finally:
        fleet.close()
        nova.close()
        proxy.close()
