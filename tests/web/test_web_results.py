"""``/results/<key>``: only referenced keys, images inline, the rest as attachments,
immutable caching with ETags, and presigned redirects when S3 has a public endpoint."""

from __future__ import annotations

import io
import urllib.request

import pytest
from novatests.web import StandInWorker, enqueue
from PIL import Image

from nova_queue import Settings
from nova_queue.stores import artifact_key, open_store


@pytest.fixture
def done_job(nova, store):
    job = enqueue(nova, ["a", "b"])
    w = StandInWorker(nova, store, "w1")
    [lease] = w.claim()
    key = w.finish(lease)
    return job, key


def test_result_image_served_inline_with_cache_headers(client, done_job):
    _, key = done_job
    resp = client.get(f"/results/{key}")
    assert resp.status_code == 200 and resp.mimetype == "image/png"
    assert Image.open(io.BytesIO(resp.data)).size == (64, 64)
    assert resp.headers["Content-Disposition"].startswith("inline")
    assert resp.headers["Cache-Control"] == "public, max-age=31536000, immutable"
    assert resp.headers["X-Content-Type-Options"] == "nosniff"
    etag = resp.headers["ETag"]
    again = client.get(f"/results/{key}", headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.data == b""
    assert again.headers["Cache-Control"] == "public, max-age=31536000, immutable"


def test_a_result_held_in_redis_is_served_and_shown_like_a_stored_one(client, nova, store):
    job = enqueue(nova, ["small"])
    w = StandInWorker(nova, store, "w1")
    [lease] = w.claim()
    key = w.finish(lease, inline=True)
    assert store.head(key) is None  # not in the store: in Redis
    resp = client.get(f"/results/{key}")
    assert resp.status_code == 200 and resp.mimetype == "image/png"
    assert Image.open(io.BytesIO(resp.data)).size == (64, 64)
    assert resp.headers["Cache-Control"] == "public, max-age=31536000, immutable"
    page = client.get(f"/jobs/{job}/tasks/0")
    assert page.status_code == 200 and b"inline (Redis)" in page.data
    # an older attempt's key for the same task is not served from Redis
    assert client.get(f"/results/{key.replace('-g1-', '-g9-')}").status_code == 404


@pytest.mark.parametrize("path", [
    "/results/../etc/passwd",
    "/results/..%2f..%2fetc%2fpasswd",
    "/results/jobs/../../etc/passwd",
    "/results/jobs/%2e%2e/%2e%2e/secret",
    "/results//etc/passwd",
    "/results/.nova/node.json",
    "/results/jobs/J/.lock",
    "/results/other/prefix.png",
])
def test_traversal_and_unreferenced_keys_are_404(client, done_job, path):
    assert client.get(path, follow_redirects=True).status_code == 404


def test_only_the_current_result_of_a_task_is_served(client, nova, store, done_job):
    job, key = done_job
    # an orphan from an older lease, in the store but not referenced by the task
    orphan = key.replace("-g1-", "-g9-")
    store.put(orphan, b"\x89PNG old", "image/png")
    assert client.get(f"/results/{orphan}").status_code == 404
    # a stored object for a task that has no result yet
    pending = f"jobs/{job}/results/00001-g1-abcdef.png"
    store.put(pending, b"\x89PNG", "image/png")
    assert client.get(f"/results/{pending}").status_code == 404
    # artifacts of unknown jobs are not served even when the object exists
    store.put("jobs/ghost/manifest.json", b"{}", "application/json")
    assert client.get("/results/jobs/ghost/manifest.json").status_code == 404


def test_a_result_field_pointing_elsewhere_is_neither_shown_nor_served(client, nova, store):
    """Issue 13, item 5, in the gallery: a worker credential may HSET a task's ``result``.
    Pointed at another job's image, this job's card would have shown it as its own; pointed
    at an object planted under its own task, the gallery would have served it."""
    other = enqueue(nova, ["other job's secret"])
    w = StandInWorker(nova, store, "w1")
    [lease] = w.claim()
    other_key = w.finish(lease)
    job = enqueue(nova, ["mine"])
    [lease] = w.claim()
    own = w.finish(lease)
    nova.redis.hset(nova.keys.task(f"{job}:0"), "result", other_key)
    page = client.get(f"/jobs/{job}").get_data(as_text=True)
    assert other_key not in page and "<img " not in page
    assert f"/results/{other_key}" not in client.get(f"/jobs/{job}/tasks/0").get_data(as_text=True)
    assert client.get(f"/results/{other_key}").status_code == 200  # still the other job's
    assert other_key in client.get(f"/jobs/{other}").get_data(as_text=True)
    # planted beside the task's own result, under a lease that never existed
    planted = own.replace("-g1-", "-g7-")
    store.put(planted, b"\x89PNG planted", "image/png")
    nova.redis.hset(nova.keys.task(f"{job}:0"), "result", planted)
    assert client.get(f"/results/{planted}").status_code == 404
    assert planted not in client.get(f"/jobs/{job}").get_data(as_text=True)
    nova.redis.hset(nova.keys.task(f"{job}:0"), "result", own)
    assert client.get(f"/results/{own}").status_code == 200
    assert own in client.get(f"/jobs/{job}").get_data(as_text=True)


def test_non_images_are_attachments(client, nova, store, done_job):
    job, _ = done_job
    store.put(artifact_key(job, "manifest.json"), b'{"a": 1}', "application/json")
    resp = client.get(f"/results/jobs/{job}/manifest.json")
    assert resp.status_code == 200 and resp.mimetype == "application/json"
    assert resp.headers["Content-Disposition"] == 'attachment; filename="manifest.json"'
    assert resp.headers["X-Content-Type-Options"] == "nosniff"
    # an SVG (scriptable) committed as a result: never inline, never as image/svg+xml
    w = StandInWorker(nova, store, "w2")
    [lease] = w.claim()
    key = f"jobs/{job}/results/{lease.index:05d}-g{lease.lease_gen}-{lease.attempt_id}.svg"
    store.put(key, b"<svg onload='alert(1)'/>", "image/svg+xml")
    nova.complete("w2", lease, key, run_s=0.1, warm=True)
    resp = client.get(f"/results/{key}")
    assert resp.status_code == 200 and resp.mimetype == "application/octet-stream"
    assert resp.headers["Content-Disposition"].startswith("attachment")
    assert "sandbox" in resp.headers["Content-Security-Policy"]


def test_referenced_but_missing_object_is_404(client, nova, store):
    enqueue(nova, ["a"])
    w = StandInWorker(nova, store, "w1")
    [lease] = w.claim()
    key = f"jobs/{lease.job_id}/results/00000-g1-{lease.attempt_id}.png"
    nova.complete("w1", lease, key, run_s=0.1, warm=True)  # committed, never uploaded
    assert client.get(f"/results/{key}").status_code == 404


@pytest.mark.s3
def test_public_s3_endpoint_redirects_to_a_presigned_url(redis_url, namespace, nova,
                                                         s3_store_url, s3_server):
    from nova_queue.web import create_app

    settings = Settings(redis_url=redis_url, namespace=namespace, store_url=s3_store_url,
                        s3_public_endpoint=s3_server.endpoint)
    s3 = open_store(s3_store_url)
    enqueue(nova, ["a"])
    worker = StandInWorker(nova, s3, "w1")
    [lease] = worker.claim()
    key = worker.finish(lease)
    app = create_app({"TESTING": True, "SECRET_KEY": "x"}, settings=settings)
    resp = app.test_client().get(f"/results/{key}")
    assert resp.status_code == 302
    location = resp.headers["Location"]
    assert location.startswith(s3_server.endpoint) and "X-Amz-Signature" in location
    assert resp.headers["Cache-Control"].startswith("private")
    with urllib.request.urlopen(location, timeout=10) as got:
        assert got.read()[:8] == b"\x89PNG\r\n\x1a\n"
    csp = app.test_client().get("/").headers["Content-Security-Policy"]
    assert f"img-src 'self' data: {s3_server.endpoint}" in csp
    app.extensions["nova"].close()
    s3.close()
