"""The JSON API (same shapes as the CLI's --json), the polling fallback of the live
protocol, and /metrics read from Redis at scrape time."""

from __future__ import annotations

import json

import pytest
from novatests.seed import set_speed
from novatests.web import StandInWorker, enqueue
from prometheus_client.parser import text_string_to_metric_families

from nova_queue import Settings, TaskSpec


def roundtrip(value):
    return json.loads(json.dumps(value))


@pytest.fixture
def busy(nova, store):
    """Two jobs, one finished task, one leased, a worker with a speed estimate."""
    job = enqueue(nova, ["a", "b", "c"])
    other = enqueue(nova, ["x"], name="second")
    w = StandInWorker(nova, store, "w1", name="gpu-one", backend="cuda")
    [lease] = w.claim()
    w.finish(lease, run_s=0.5)
    set_speed(nova, "w1", "synthetic", 0.5)
    w.claim()
    return job, other


def test_job_api_equals_status_json(client, nova, busy):
    job, other = busy
    assert client.get(f"/api/jobs/{job}").get_json() == {**roundtrip(nova.job(job).to_json()),
                                                          "eligible_workers": 1,
                                                          "cannot_run": []}
    listed = client.get("/api/jobs").get_json()
    assert listed == roundtrip([j.to_json(with_tasks=False) for j in nova.jobs()])
    assert [j["job_id"] for j in listed] == [other, job]
    assert client.get("/api/jobs?limit=1").get_json()[0]["job_id"] == other
    resp = client.get("/api/jobs/nope")
    assert resp.status_code == 404 and "unknown job" in resp.get_json()["error"]
    assert client.get("/api/jobs?limit=0").status_code == 400


def test_workers_and_failed_api(client, nova, busy):
    assert client.get("/api/workers").get_json() == roundtrip([w.to_json()
                                                               for w in nova.workers()])
    assert client.get("/api/failed").get_json() == []


def test_events_api_after_and_job_filter(client, nova, busy):
    _, other = busy
    everything = client.get("/api/events").get_json()
    assert everything == roundtrip([e.to_json() for e in nova.recent_events(200)])
    assert {e["type"] for e in everything} >= {"enqueued", "worker_joined", "claimed",
                                               "completed"}
    mine = client.get(f"/api/events?job={other}").get_json()
    assert mine and all(e["job"] == other for e in mine)
    middle = everything[2]["id"]
    later = client.get(f"/api/events?after={middle}").get_json()
    assert [e["id"] for e in later] == [e["id"] for e in everything[3:]]
    assert client.get("/api/events?after=bogus").status_code == 400


def test_polling_fallback_snapshot_then_delta(client, nova, store):
    job = enqueue(nova, ["a", "b"])
    snap = client.get(f"/api/live/jobs/{job}").get_json()
    assert snap["type"] == "snapshot" and [t["state"] for t in snap["tasks"]] == ["pending"] * 2
    assert snap["job"]["job_id"] == job and snap["job"]["eta_text"] == "–"
    w = StandInWorker(nova, store, "w1", name="poller")
    [lease] = w.claim()
    w.finish(lease)
    delta = client.get(f"/api/live/jobs/{job}?after={snap['last_id']}").get_json()
    assert delta["type"] == "delta"
    assert [e["type"] for e in delta["events"]] == ["claimed", "completed"]
    assert [(t["index"], t["state"]) for t in delta["tasks"]] == [(0, "done")]
    assert delta["tasks"][0]["image_url"].startswith(f"/results/jobs/{job}/results/00000-g1-")
    assert delta["job"]["done"] == 1 and delta["job"]["eta_s"] is not None
    nothing = client.get(f"/api/live/jobs/{job}?after={delta['last_id']}").get_json()
    assert nothing["type"] == "delta" and nothing["events"] == [] and nothing["tasks"] == []
    assert nothing["last_id"] == delta["last_id"]
    assert client.get("/api/live/jobs/nope").status_code == 404
    ev = client.get(f"/api/live/events?after={snap['last_id']}").get_json()
    assert [e["type"] for e in ev["events"]] == ["worker_joined", "claimed", "completed"]
    assert [j["job_id"] for j in ev["jobs"]] == [job]


def test_resume_after_trimmed_events_gets_a_snapshot(client, nova):
    job = enqueue(nova, ["a"])
    first = nova.last_event_id()
    for i in range(5):
        nova.enqueue("synthetic", [TaskSpec(f"filler {i}")])
    nova.redis.xtrim(nova.keys.events(), maxlen=2, approximate=False)
    msg = client.get(f"/api/live/jobs/{job}?after={first}").get_json()
    assert msg["type"] == "snapshot"
    assert client.get(f"/api/live/jobs/{job}?after=garbage").get_json()["type"] == "snapshot"


def scrape(client) -> dict:
    text = client.get("/metrics").get_data(as_text=True)
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_metrics_names_units_and_labels(client, nova, busy):
    job, other = busy
    resp = client.get("/metrics")
    assert resp.status_code == 200 and resp.mimetype == "text/plain"
    families = scrape(client)
    assert all(name.startswith("novaqueue_") for name in families)
    samples = [s for f in families.values() for s in f.samples]
    for s in samples:
        assert job not in s.labels.values() and other not in s.labels.values()
        assert "job" not in s.labels and "job_id" not in s.labels
        assert set(s.labels) <= {"app", "state", "backend", "worker", "name"}
    value = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in samples}
    assert value[("novaqueue_up", ())] == 1
    assert value[("novaqueue_tasks_pending", (("app", "synthetic"),))] == 2
    assert value[("novaqueue_tasks_leased", (("app", "synthetic"),))] == 1
    wl = (("backend", "cuda"), ("name", "gpu-one"), ("worker", "w1"))
    assert value[("novaqueue_worker_tasks_done_total", wl)] == 1
    assert value[("novaqueue_worker_task_seconds", (("app", "synthetic"), *wl))] == 0.5
    assert value[("novaqueue_jobs", (("state", "running"),))] == 1
    assert value[("novaqueue_jobs", (("state", "queued"),))] == 1
    assert families["novaqueue_worker_tasks_done"].type == "counter"
    # read at scrape time: a new job shows up without restarting anything
    enqueue(nova, ["more"])
    assert scrape(client)["novaqueue_tasks_pending"].samples[0].value == 3


def test_metrics_and_pages_when_redis_is_down(tmp_path):
    from nova_queue.local import free_port
    from nova_queue.web import create_app

    settings = Settings(redis_url=f"redis://127.0.0.1:{free_port()}/0",
                        store_url=(tmp_path / "s").as_uri())
    down = create_app({"TESTING": True, "SECRET_KEY": "x"}, settings=settings)
    c = down.test_client()
    families = scrape(c)
    assert [s.value for s in families["novaqueue_up"].samples] == [0]
    assert set(families) == {"novaqueue_up"}
    page = c.get("/")
    assert page.status_code == 503 and "Redis is unreachable" in page.get_data(as_text=True)
    assert c.get("/api/jobs").status_code == 503
    down.extensions["nova"].close()


def test_job_api_counts_eligible_workers(client, nova, store):
    job = nova.enqueue("txt2img", [TaskSpec("a castle")])
    StandInWorker(nova, store, "w-syn", name="syn")
    assert client.get(f"/api/jobs/{job}").get_json()["eligible_workers"] == 0
    nova.register_worker("w-gpu", {"name": "gpu", "backend": "cuda"}, ("txt2img", "synthetic"))
    assert client.get(f"/api/jobs/{job}").get_json()["eligible_workers"] == 1
    live = client.get(f"/api/live/jobs/{job}").get_json()
    assert live["job"]["eligible_workers"] == 1 and live["job"]["workers_text"] == ""
