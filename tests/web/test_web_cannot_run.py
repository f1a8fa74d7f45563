"""The gallery on workers that could not prepare a job (their ``cannot_run`` marks): a job
no live worker can run says why on its page, worker by worker ("waiting: no live worker can
run this job — w1: ..."), live and in the API; the Workers page and ``/api/workers`` show
each live mark. Hostile reasons are escaped."""

from __future__ import annotations

import re

from novatests.seed import set_speed
from novatests.web import XSS, XSS_ESCAPED, StandInWorker, enqueue

NO_TORCH = "No module named 'torch'; to fix: pip install 'nova-queue[txt2img]'"


def unable(nova, store, wid: str, name: str, job: str, reason: str = NO_TORCH) -> None:
    """``wid`` joins, claims the job's tasks and fails to prepare them (it is then marked)."""
    StandInWorker(nova, store, wid, name=name)
    set_speed(nova, wid, "synthetic", 1.0)
    for lease in nova.claim(wid, "synthetic", k=8).leases:
        assert lease.job_id == job
        nova.fail(wid, lease, "prepare", reason)


def workers_text(html: str) -> str:
    m = re.search(r'data-f="workers_text" ?(hidden)?>(.*?)</p>', html, re.DOTALL)
    assert m and not m.group(1), "the job page shows no workers note"
    return m.group(2)


def test_the_job_page_says_why_no_live_worker_can_run_it(client, nova, store):
    job = enqueue(nova, ["a", "b"])
    unable(nova, store, "w-1", "w1", job)
    text = workers_text(client.get(f"/jobs/{job}").get_data(as_text=True))
    assert text == ("waiting: no live worker can run this job — w1: No module named "
                    "&#39;torch&#39;; to fix: pip install &#39;nova-queue[txt2img]&#39;")
    live = client.get(f"/api/live/jobs/{job}").get_json()["job"]
    assert live["workers_text"].startswith("waiting: no live worker can run this job — w1: ")
    assert [b["name"] for b in live["cannot_run"]] == ["w1"]
    api = client.get(f"/api/jobs/{job}").get_json()
    assert api["eligible_workers"] == 0 and api["cannot_run"][0]["reason"] == NO_TORCH
    assert api["failed"] == 0 and api["pending"] == 2
    StandInWorker(nova, store, "w-2", name="w2")  # one that can: the note goes
    html = client.get(f"/jobs/{job}").get_data(as_text=True)
    assert re.search(r'data-f="workers_text" hidden>', html)
    assert client.get(f"/api/jobs/{job}").get_json()["eligible_workers"] == 1


def test_the_workers_page_and_api_show_each_live_mark_escaped(client, nova, store):
    job = enqueue(nova, ["a"])
    unable(nova, store, "w-1", "w1", job, XSS)
    html = client.get("/workers").get_data(as_text=True)
    [line] = re.findall(r'<p class="alert warn cannot-run">(.*?)</p>', html, re.DOTALL)
    assert line.startswith(f"cannot run synthetic: {XSS_ESCAPED} (marked ")
    assert re.search(r"; offered again in (10 min 00|9 min \d\d) s or when it restarts\)$", line)
    assert XSS not in html
    [w] = client.get("/api/workers").get_json()
    assert [(m["app"], m["model"], m["reason"]) for m in w["cannot_run"]] == [
        ("synthetic", "", XSS)]
    [group] = client.get("/api/live/workers").get_json()["groups"]
    [text] = group["workers"][0]["cannot_run_texts"]
    assert text.startswith(f"cannot run synthetic: {XSS} (marked ")
