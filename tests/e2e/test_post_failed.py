"""Post-processing of a job whose every task failed, end to end: a real worker fails it, a
real ``post-worker --burst`` builds its artifacts (each task's error in the manifest) and
POSTs the webhook, which says ``"state": "failed"``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from novatests.cli import nova_env, process_env
from novatests.webhook import Webhook

from nova_queue import NovaClient, TaskSpec
from nova_queue.stores import ArtifactKeys, open_store

pytestmark = pytest.mark.slow


def run(env: dict[str, str], *args: str) -> None:
    """``python -m nova_queue ARGS`` to completion; it must succeed."""
    proc = subprocess.run([sys.executable, "-m", "nova_queue", *args], env=env, check=False,
                          capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, f"{args} exited {proc.returncode}:\n{proc.stderr}"


@pytest.mark.timeout(180)
def test_a_failed_job_gets_its_artifacts_and_a_webhook_that_says_failed(
        redis_url: str, namespace: str, tmp_path: Path):
    hook = Webhook([])
    env = process_env(nova_env(redis_url, namespace, tmp_path, NOVA_WEBHOOK_URL=hook.url))
    client = NovaClient.from_url(redis_url, namespace=namespace)
    try:
        job = client.enqueue("synthetic", [TaskSpec("poison one", 0.01),
                                           TaskSpec("poison two", 0.01)],
                             params={"seconds": "0.01", "size": "64", "crash_on": "poison"},
                             max_attempts=1)
        run(env, "worker", "--app", "synthetic", "--burst", "--no-benchmark")
        st = client.job(job, with_tasks=False)
        assert (st.state, st.done, st.failed) == ("failed", 0, 2)
        assert client.redis.zscore(client.keys.finished(), job) is not None  # in the outbox
        run(env, "post-worker", "--burst")
        assert client.redis.zscore(client.keys.finished(), job) is None
    finally:
        client.close()
        hook.close()
    store = open_store(env["NOVA_STORE_URL"])
    manifest = json.loads(store.get(ArtifactKeys.for_job(job).manifest).data)
    assert (manifest["job"]["state"], manifest["job"]["failed"]) == ("failed", 2)
    assert [(t["state"], t["error_kind"], t["file"]) for t in manifest["tasks"]] == [
        ("failed", "error", None)] * 2
    assert all("PoisonTaskError" in t["error"] for t in manifest["tasks"])
    [body] = hook.received
    assert (body["event"], body["job_id"], body["state"]) == ("job.finished", job, "failed")
    assert body["counts"] == {"total": 2, "done": 0, "failed": 2, "cancelled": 0}
