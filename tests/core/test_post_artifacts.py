"""The post-worker's artifacts (``nova_queue.post.artifacts``), built in-process from a real
Redis and a file store: what goes into a job's zip and contact sheet. (The post-worker as
a real RQ process, on both stores, is in ``tests/e2e/test_post.py``.)"""

from __future__ import annotations

import io
import json
import zipfile

from nova_queue import TaskSpec
from nova_queue.post.artifacts import build_artifacts
from nova_queue.stores import open_store, result_key


def test_artifacts_take_only_each_tasks_own_result(nova, tmp_path):
    """Issue 13, item 5, in the post-worker: a worker credential may HSET a task's
    ``result``. Pointed at another job's image it went into this job's zip and contact
    sheet as this job's; now that task is left out (its manifest entry has no file)."""
    store = open_store((tmp_path / "store").as_uri())
    nova.register_worker("w", {"name": "w"}, ["synthetic"])

    def run(prompt: str, data: bytes) -> tuple[str, str]:
        job = nova.enqueue("synthetic", [TaskSpec(prompt, 1.0)])
        [lease] = nova.claim("w", "synthetic").leases
        key = result_key(job, 0, lease.lease_gen, lease.attempt_id, "png")
        store.put(key, data, "image/png")
        nova.complete("w", lease, key, run_s=0.1, warm=True)
        return job, key

    _, other_key = run("other", b"the other job's image")
    job, own = run("mine", b"my image")
    nova.redis.hset(nova.keys.task(f"{job}:0"), "result", other_key)
    keys = build_artifacts(nova, store, job)
    with zipfile.ZipFile(io.BytesIO(store.get(keys.zip).data)) as zf:
        assert zf.namelist() == ["manifest.json"]
    [entry] = json.loads(store.get(keys.manifest).data)["tasks"]
    assert entry["file"] is None and entry["result"] == other_key
    nova.redis.hset(nova.keys.task(f"{job}:0"), "result", own)
    keys = build_artifacts(nova, store, job)
    with zipfile.ZipFile(io.BytesIO(store.get(keys.zip).data)) as zf:
        assert zf.read("results/00000.png") == b"my image"
