"""Web pages through Flask's test client: escaping, bidi, gallery provenance, workers,
events and failed tasks, all on real Redis state."""

from __future__ import annotations

import re

import pytest
from novatests.seed import FORGED_VALUES, expire_worker, forge_fields
from novatests.web import XSS, XSS_ESCAPED, StandInWorker, enqueue, unsafe_markup

from nova_queue import TaskSpec
from nova_queue.errors import StaleResultError
from nova_queue.models import JobStatus
from nova_queue.stores import artifact_key
from nova_queue.web.present import eta_s

BIDI = "abc\u202egnp.exe\u2066x\u2069 \u200f\u061c"


def pages_of(job_id: str) -> list[str]:
    return ["/", f"/jobs/{job_id}", f"/jobs/{job_id}/tasks/0", f"/jobs/{job_id}/tasks/1",
            "/workers", "/events", f"/events?job={job_id}", "/failed"]


@pytest.fixture
def hostile_job(nova, store):
    """A job whose prompt, name, worker name, error and note are all hostile text."""
    job = enqueue(nova, [XSS + " " + BIDI, XSS, "plain"], name=XSS + BIDI, max_attempts=1)
    w = StandInWorker(nova, store, "w-xss", name=XSS + BIDI, backend="cuda")
    first, second = w.claim(), w.claim()
    w.finish(first[0], meta={"note": XSS + BIDI})
    nova.fail("w-xss", second[0], "error", XSS + BIDI)
    w.claim()  # task 2 stays leased: its placeholder names the owner
    return job


def test_every_page_escapes_user_text(client, hostile_job):
    assert len(unsafe_markup(XSS)) == 3  # the audit sees the raw payload
    for path in pages_of(hostile_job):
        resp = client.get(path)
        html = resp.get_data(as_text=True)
        assert resp.status_code == 200, path
        assert XSS not in html and "<script>alert" not in html, path
        assert unsafe_markup(html) == [], path
    gallery = client.get(f"/jobs/{hostile_job}").get_data(as_text=True)
    assert XSS_ESCAPED in gallery  # shown as text, not dropped


def test_bidi_controls_are_made_visible_everywhere(client, hostile_job):
    for path in pages_of(hostile_job):
        html = client.get(path).get_data(as_text=True)
        for ch in "\u202e\u2066\u2069\u200f\u061c":
            assert ch not in html, (path, hex(ord(ch)))
    gallery = client.get(f"/jobs/{hostile_job}").get_data(as_text=True)
    for marker in ("\u27eaU+202E\u27eb", "\u27eaU+2066\u27eb", "\u27eaU+2069\u27eb",
                   "\u27eaU+200F\u27eb", "\u27eaU+061C\u27eb"):
        assert marker in gallery


@pytest.mark.parametrize("value", FORGED_VALUES)
def test_every_page_survives_fields_forged_by_a_worker(client, nova, store, value):
    """A worker credential may HSET any field: ``done`` set to ``inf`` in one job made the
    home page (and every page listing jobs) answer 500 for everyone; other fields broke the
    job, task, workers, events and metrics pages."""
    job = enqueue(nova, ["a", "b", "c"], max_attempts=1)
    w = StandInWorker(nova, store, "w1")
    [done] = w.claim()
    w.finish(done, meta={"seed": 1})
    [failed] = w.claim()
    nova.fail("w1", failed, "error", "boom")
    forge_fields(nova, value, job_ids=[job], worker_ids=["w1"])
    for path in ("/", f"/jobs/{job}", f"/jobs/{job}/tasks/0", f"/jobs/{job}/tasks/1",
                 "/workers", "/failed", "/events", f"/events?job={job}", "/metrics",
                 "/api/jobs", f"/api/jobs/{job}", "/api/workers"):
        assert client.get(path).status_code == 200, path


def test_gallery_tags_each_result_with_its_provenance(client, nova, store):
    job = enqueue(nova, [f"p{i}" for i in range(6)])
    backends = {"cuda": "CUDA", "rocm": "ROCm", "mps": "Metal", "cpu": "CPU"}
    for i, backend in enumerate(backends):
        w = StandInWorker(nova, store, f"w-{backend}", name=f"box-{backend}", backend=backend,
                          host=f"host-{backend}")
        [lease] = w.claim()
        w.finish(lease, warm=i % 2 == 1, run_s=1.5,
                 meta={"note": "random-weight model, images are noise"} if i == 0 else {})
    owner = StandInWorker(nova, store, "w-owner", name="owner-box", backend="cuda",
                          host="gpu-host")
    owner.claim()  # task 4: in flight
    html = client.get(f"/jobs/{job}").get_data(as_text=True)
    for label in backends.values():
        assert re.search(rf'class="badge backend backend-\w+"[^>]*>{label}<', html), label
    assert "running on owner-box (CUDA on gpu-host)" in html
    assert "waiting for a worker" in html  # task 5
    assert ">warm<" in html and ">cold<" in html
    assert "actual 1.50 s" in html and "attempt 1" in html and "lease gen 1" in html
    assert "random-weight model, images are noise" in html
    assert html.count("<img ") == 4 and html.count('class="placeholder"') == 2
    assert "4/6 done" in html
    detail = client.get(f"/jobs/{job}/tasks/0").get_data(as_text=True)
    assert "random-weight model" in detail and "box-cuda" in detail


def test_gallery_links_artifacts_only_when_stored(client, nova, store):
    job = enqueue(nova, ["a"])
    html = client.get(f"/jobs/{job}").get_data(as_text=True)
    assert "Artifacts:" not in html
    store.put(artifact_key(job, "manifest.json"), b"{}", "application/json")
    html = client.get(f"/jobs/{job}").get_data(as_text=True)
    assert f'href="/results/jobs/{job}/manifest.json"' in html
    assert "contact-sheet.png" not in html and f"{job}.zip" not in html


def test_unknown_job_is_404(client):
    assert client.get("/jobs/nope").status_code == 404
    assert client.get("/jobs/nope/tasks/0").status_code == 404


def test_workers_grouped_by_host_with_warning_for_unserved_app(client, nova, store):
    StandInWorker(nova, store, "w1", name="alpha", host="gpu-host", host_id="h-gpu",
                  backend="cuda")
    StandInWorker(nova, store, "w2", name="beta", host="gpu-host", host_id="h-gpu",
                  backend="cuda")
    StandInWorker(nova, store, "w3", name="gamma", host="laptop", host_id="h-mac",
                  backend="mps")
    enqueue(nova, ["served"])
    nova.enqueue("lonely", [TaskSpec("x")])
    html = client.get("/workers").get_data(as_text=True)
    sections = re.findall(r'<section class="panel host">.*?</section>', html, re.DOTALL)
    assert len(sections) == 2
    gpu = next(s for s in sections if "gpu-host" in s)
    assert "alpha" in gpu and "beta" in gpu and "gamma" not in gpu and "2 live" in gpu
    assert "pending but no live worker serves lonely" in html
    assert "serves synthetic" not in html
    view = client.get("/api/live/workers").get_json()
    assert [w["app"] for w in view["warnings"]] == ["lonely"]


def test_job_story_shows_reassignment(client, nova, store):
    job = enqueue(nova, ["only"])
    first = StandInWorker(nova, store, "w-first", name="first-box", backend="rocm")
    [lease] = first.claim()
    expire_worker(nova, "w-first")
    nova.reap()
    second = StandInWorker(nova, store, "w-second", name="second-box", backend="cuda")
    [again] = second.claim()
    second.finish(again)
    with pytest.raises(StaleResultError):
        nova.complete("w-first", lease, "jobs/x/results/late.png", run_s=1.0, warm=True)
    html = client.get(f"/jobs/{job}").get_data(as_text=True)
    story = html[html.index('id="timeline"'):]
    order = ["task 0 claimed by first-box (ROCm)", "task 0 requeued after lost on first-box",
             "task 0 claimed by second-box (CUDA)", "task 0 completed by second-box",
             "stale complete of task 0 from first-box rejected"]
    positions = [story.find(text) for text in order]
    assert all(p >= 0 for p in positions), list(zip(order, positions))
    assert positions == sorted(positions)
    events = client.get("/events").get_data(as_text=True)
    assert "worker first-box lost" in events and "attempt 2, lease gen 2" in events


def test_failed_page_lists_error_and_attempts(client, nova, store):
    job = enqueue(nova, ["boom"], max_attempts=1)
    w = StandInWorker(nova, store, "w1")
    [lease] = w.claim()
    nova.fail("w1", lease, "error", "CUDA error: device-side assert")
    html = client.get("/failed").get_data(as_text=True)
    assert f"{job}:0" in html and "error: CUDA error: device-side assert" in html
    assert 'action="/failed/retry"' in html


def test_eta_formula():
    base = {"job_id": "j", "app": "a", "state": "running", "params": {}, "priority": 0,
            "max_attempts": 1, "name": "", "created_ms": 0, "finished_ms": None, "failed": 0,
            "cancelled": 0, "tasks": []}
    job = JobStatus(**base, started_ms=1000, total=10, pending=5, leased=1, done=4)
    assert eta_s(job, now_ms=9000) == pytest.approx(6 / (4 / 8.0))  # 6 left at 0.5 task/s
    assert eta_s(JobStatus(**base, started_ms=1000, total=3, pending=3, leased=0, done=0),
                 9000) is None
    assert eta_s(JobStatus(**base, started_ms=None, total=3, pending=3, leased=0, done=0),
                 9000) is None
    assert eta_s(JobStatus(**base, started_ms=1000, total=3, pending=0, leased=0, done=3),
                 9000) == 0.0


def test_large_jobs_are_paged(client, nova):
    from nova_queue.web.livefeed import PAGE_SIZE

    job = enqueue(nova, [f"p{i}" for i in range(PAGE_SIZE + 2)])
    first = client.get(f"/jobs/{job}").get_data(as_text=True)
    assert first.count('class="card ') == PAGE_SIZE
    assert f"tasks 1–{PAGE_SIZE} of {PAGE_SIZE + 2}" in first and "later tasks" in first
    last = client.get(f"/jobs/{job}?start={PAGE_SIZE}").get_data(as_text=True)
    assert last.count('class="card ') == 2 and f'id="task-{PAGE_SIZE + 1}"' in last
    assert "earlier tasks" in last and "later tasks" not in last
    assert client.get(f"/jobs/{job}?start=-1").status_code == 200
    assert client.get(f"/jobs/{job}?start=abc").status_code == 400


def workers_note(html: str) -> tuple[bool, str]:
    """(hidden?, text) of the job page's "no live worker" note."""
    m = re.search(r'<p class="alert warn" role="status" data-f="workers_text" ?(hidden)?>'
                  r'(.*?)</p>', html, re.DOTALL)
    assert m, "the job page has no workers note"
    return bool(m.group(1)), m.group(2)


def test_job_page_says_when_no_live_worker_serves_its_app(client, nova, store):
    job = nova.enqueue("txt2img", [TaskSpec("a castle"), TaskSpec("a moat")])
    hidden, text = workers_note(client.get(f"/jobs/{job}").get_data(as_text=True))
    assert not hidden
    assert text == ("No live worker serves app &#39;txt2img&#39; — no worker is live right "
                    "now. Tasks wait until one joins (nova-queue worker --app txt2img).")
    StandInWorker(nova, store, "w-syn", name="syn")
    StandInWorker(nova, store, "w-syn2", name="syn2")
    hidden, text = workers_note(client.get(f"/jobs/{job}").get_data(as_text=True))
    assert not hidden and "live workers serve: synthetic (2). Tasks wait" in text
    # a synthetic job on the same page shows nothing
    served = enqueue(nova, ["fine"])
    assert workers_note(client.get(f"/jobs/{served}").get_data(as_text=True)) == (True, "")
    # a worker for the app joins: the note goes (on reload; live in test_web_live.py)
    nova.register_worker("w-gpu", {"name": "gpu", "backend": "cuda"}, ("txt2img",))
    assert workers_note(client.get(f"/jobs/{job}").get_data(as_text=True)) == (True, "")
    # ... and comes back when it is lost
    expire_worker(nova, "w-gpu")
    hidden, text = workers_note(client.get(f"/jobs/{job}").get_data(as_text=True))
    assert not hidden and "No live worker serves app &#39;txt2img&#39;" in text


def test_finished_job_shows_no_worker_note(client, nova, store):
    job = nova.enqueue("txt2img", [TaskSpec("x")])
    nova.cancel(job)
    assert workers_note(client.get(f"/jobs/{job}").get_data(as_text=True)) == (True, "")
