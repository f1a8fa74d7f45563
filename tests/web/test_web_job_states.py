"""How the gallery, its JSON and /metrics show a job's end: a red ``failed`` badge when every
task failed, an amber ``done · N failed`` when some did (never the green of a full success),
a green ``done`` when none did; the JSON API equal to the Python API's."""

from __future__ import annotations

import json
import re

import pytest
from novatests.web import StandInWorker, enqueue
from prometheus_client.parser import text_string_to_metric_families


@pytest.fixture
def ended(nova, store):
    """Three finished jobs of one attempt per task: every task failed, one of three failed,
    none failed."""
    w = StandInWorker(nova, store, "w1", name="cpu-one")
    jobs = {}
    for name, outcomes in (("failed", "ff"), ("partial", "dfd"), ("done", "d")):
        jobs[name] = enqueue(nova, [f"{name} {i}" for i in range(len(outcomes))],
                             max_attempts=1, name=name)
        for outcome in outcomes:
            [lease] = w.claim()
            if outcome == "f":
                nova.fail("w1", lease, "error", "boom")
            else:
                w.finish(lease)
    return jobs


def badge(html: str) -> tuple[str, str]:
    """The job page's head: its tone and its badge's text."""
    tone = re.search(r'id="job"[^>]* data-tone="([^"]*)"', html)
    pill = re.search(r'<span class="pill state" data-f="state_text">([^<]*)</span>', html)
    assert tone and pill, html[:2000]
    return tone.group(1), pill.group(1)


def test_the_gallery_badge_says_failed_or_how_many_failed(client, ended):
    shown = {name: badge(client.get(f"/jobs/{job}").get_data(as_text=True))
             for name, job in ended.items()}
    assert shown == {"failed": ("failed", "failed"),
                     "partial": ("partial", "done · 1 failed"),
                     "done": ("done", "done")}
    page = client.get("/").get_data(as_text=True)
    for name, job in ended.items():
        row = re.search(rf'<tr class="job-row state-(\w+)" data-job="{job}">.*?'
                        r'data-f="state_text">([^<]*)<', page, re.DOTALL)
        assert row and row.groups() == shown[name], (name, row and row.groups())


def test_the_live_feed_carries_the_badge(client, ended):
    for name, text in (("failed", "failed"), ("partial", "done · 1 failed")):
        msg = client.get(f"/api/live/jobs/{ended[name]}").get_json()
        job = msg["job"]
        assert (job["tone"], job["state_text"], job["eta_text"]) == (
            name, text, "failed" if name == "failed" else "done")
    rows = {j["job_id"]: j for j in client.get("/api/live/events").get_json()["jobs"]}
    assert rows[ended["failed"]]["tone"] == "failed"
    assert rows[ended["partial"]]["state_text"] == "done · 1 failed"


def test_the_json_api_equals_the_python_api_on_ended_jobs(client, nova, ended):
    for job in ended.values():
        assert client.get(f"/api/jobs/{job}").get_json() == {
            **json.loads(json.dumps(nova.job(job).to_json())), "eligible_workers": 1,
            "cannot_run": []}
    listed = {j["job_id"]: (j["state"], j["done"], j["failed"])
              for j in client.get("/api/jobs").get_json()}
    assert listed == {ended["failed"]: ("failed", 0, 2), ended["partial"]: ("done", 2, 1),
                      ended["done"]: ("done", 1, 0)}


def test_metrics_count_failed_jobs(client, ended):
    text = client.get("/metrics").get_data(as_text=True)
    [jobs] = [f for f in text_string_to_metric_families(text) if f.name == "novaqueue_jobs"]
    by_state = {s.labels["state"]: s.value for s in jobs.samples}
    assert by_state == {"queued": 0, "running": 0, "done": 2, "failed": 1, "cancelled": 0}
