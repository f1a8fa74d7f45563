"""The gallery and its API on a long-running pool: a job whose Redis data expired answers
410 "expired" (and one purged, "purged"; not 404 "unknown"), and a namespace of another
protocol version is refused with one line naming both versions."""

from __future__ import annotations

from nova_queue import NovaClient, TaskSpec
from nova_queue.web.extensions import state_of


def expired_job(app, *, purged: bool = False) -> str:
    """A finished job deleted from Redis: its retention ran out (the sweep), or purged."""
    nova: NovaClient = state_of(app).client
    job = nova.enqueue("synthetic", [TaskSpec("a"), TaskSpec("b")])
    nova.cancel(job)
    if purged:
        nova.purge(job)
    else:
        nova.redis.zadd(nova.keys.expiring(), {job: 0})  # its retention ended long ago
        assert nova.expire()["jobs"] == 1
    return job


def test_an_expired_job_is_gone_not_unknown(app, client):
    job = expired_job(app)
    page = client.get(f"/jobs/{job}")
    assert page.status_code == 410
    assert f"job {job} expired" in page.get_data(as_text=True)
    for url in (f"/api/jobs/{job}", f"/api/live/jobs/{job}", f"/api/jobs/{job}/timeline"):
        res = client.get(url)
        assert res.status_code == 410 and "expired" in res.get_json()["error"], url
    unknown = client.get("/api/jobs/neverwas")
    assert unknown.status_code == 404 and "unknown job" in unknown.get_json()["error"]
    task = client.get(f"/jobs/{job}/tasks/0")
    assert task.status_code == 404 and "its job expired" in task.get_data(as_text=True)
    events = client.get("/api/events").get_json()
    assert [(e["job"], e["tasks"], e["why"]) for e in events if e["type"] == "job_expired"] == [
        (job, "2", "retention")]
    page = client.get("/events").get_data(as_text=True)  # the timeline says it in words
    assert f"job {job} expired from Redis (retention): 2 tasks deleted" in page


def test_a_purged_job_reads_purged(app, client):
    job = expired_job(app, purged=True)
    page = client.get(f"/jobs/{job}")
    assert page.status_code == 410
    text = page.get_data(as_text=True)
    assert f"job {job} was purged" in text and "expired" not in text
    res = client.get(f"/api/jobs/{job}")
    assert res.status_code == 410 and "was purged" in res.get_json()["error"]
    task = client.get(f"/jobs/{job}/tasks/0")
    assert task.status_code == 404 and "its job purged" in task.get_data(as_text=True)


def test_a_namespace_of_another_protocol_is_refused(app, client):
    nova: NovaClient = state_of(app).client
    assert client.get("/api/jobs").status_code == 200
    nova.redis.hset(nova.keys.meta(), "protocol", "4")
    state_of(app)._protocol_ok_at = None  # the next request asks again (else within 30 s)
    for url in ("/", "/api/jobs"):
        res = client.get(url)
        assert res.status_code == 503, url
        text = res.get_data(as_text=True)
        assert "speaks protocol 4" in text and "speaks protocol 3" in text, url
