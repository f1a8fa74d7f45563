"""The gallery on verification: a card says whether its result awaits verification, is
being re-run to check it, or stands verified by whom; the job's counts name the tasks
verifying; the Workers page shows each worker's trust and record. Driven through the real
scripts (a new worker's first result is always checked) and rendered pages."""

from __future__ import annotations

import dataclasses

from novatests.leases import rkey
from novatests.web import XSS, XSS_ESCAPED, StandInWorker, enqueue

from nova_queue.events import Event
from nova_queue.models import TaskInfo
from nova_queue.web.present import event_text, task_view, trust_text
from nova_queue.worker_info import WorkerInfo

AGREE = {"verify": {"cand": "agree"}}


def card(html: str, index: int) -> str:
    start = html.index(f'id="task-{index}"')
    return html[start:html.index("</figure>", start)]


def test_a_card_shows_a_result_awaiting_verification_then_who_verified_it(client, nova, store):
    job = enqueue(nova, ["a fox"])
    StandInWorker(nova, store, "tok.aaaaaaaaaaaa", name=XSS, trust="new")
    nova.register_worker("direct", {"name": "checker", "verifier": "1"}, ["synthetic"])
    [lease] = nova.claim("tok.aaaaaaaaaaaa", "synthetic").leases
    nova.complete("tok.aaaaaaaaaaaa", lease, rkey(lease), run_s=0.1, warm=True)
    page = client.get(f"/jobs/{job}").get_data(as_text=True)
    assert "awaiting verification" in card(page, 0) and XSS not in page
    assert f"result from {XSS_ESCAPED} awaiting verification" in card(page, 0)
    assert "1 verifying" in page
    [check] = nova.claim("direct", "synthetic").leases
    live = client.get(f"/api/live/jobs/{job}").get_json()
    assert live["tasks"][0]["verify_text"] == "re-run to verify"
    nova.complete("direct", check, rkey(check), run_s=0.1, warm=True, meta=AGREE)
    page = client.get(f"/jobs/{job}").get_data(as_text=True)
    assert "verified by checker" in card(page, 0)
    api = client.get(f"/api/jobs/{job}").get_json()["tasks"][0]
    assert (api["verified_by"], api["verified_by_name"]) == ("direct", "checker")


def test_the_workers_page_shows_trust_and_record(client, nova, store):
    StandInWorker(nova, store, "tok.aaaaaaaaaaaa", name="newbie", trust="new")
    StandInWorker(nova, store, "mine", name="mine")
    nova.redis.hset(nova.keys.trust("tok"), mapping={"verified": 3, "mismatches": 1})
    page = client.get("/workers").get_data(as_text=True)
    assert "new: 3 verified, 1 mismatch" in page and "trusted (vouched)" in page
    api = {w["name"]: w for w in client.get("/api/workers").get_json()}
    assert (api["newbie"]["trust"], api["newbie"]["verified"], api["newbie"]["mismatches"]) \
        == ("new", 3, 1)
    assert api["mine"]["trust"] == "trusted" and api["mine"]["vouched"] is True
    nova.redis.hset(nova.keys.worker("tok.aaaaaaaaaaaa"), mapping={"token": "tok",
                                                                  "owner": "dana"})
    assert "tok (owner dana)" in client.get("/workers").get_data(as_text=True)
    assert {w["name"]: w for w in client.get("/api/workers").get_json()}["newbie"]["owner"] \
        == "dana"


def test_the_texts_of_each_verification_state():
    base = TaskInfo(task_id="j:0", job_id="j", index=0, state="done", input="", cost=1.0,
                    lease_gen=2, attempt_count=1, attempt_id="a", worker_id="w",
                    worker_name="w", backend="cpu", host="", result="", claimed_ms=None,
                    finished_ms=None, deadline_ms=None, predicted_s=None, run_s=None,
                    cold_s=None, warm=None, error="", error_kind="", last_worker_id="",
                    meta={})
    text = lambda **c: task_view(dataclasses.replace(base, **c), str)["verify_text"]
    assert text() == ""
    assert text(verified_by="v1") == "verified by v1"
    assert text(verified_by="v1", verified_by_name="checker") == "verified by checker"
    assert text(state="verifying") == "awaiting verification"
    assert text(state="leased", candidates=("w",)) == "re-run to verify"
    w = WorkerInfo.from_hash({"id": "t.x", "trust": "earned"}, alive=True, current=[],
                             record={"verified": "24", "mismatches": "0"})
    assert trust_text(w) == "trusted (earned: 24 verified, 0 mismatches)"


def test_the_timeline_shows_the_held_result_its_check_and_the_verdicts(client, nova, store):
    job = enqueue(nova, ["a", "b"])
    StandInWorker(nova, store, "tok.aaaaaaaaaaaa", name="newbie", trust="new")
    nova.register_worker("direct", {"name": "checker", "verifier": "1"}, ["synthetic"])
    for verdict in (AGREE, {"verify": {"cand": "mismatch"}}):
        nova.redis.hset(nova.keys.trust("tok"), "streak", 0)  # each result is checked
        [lease] = nova.claim("tok.aaaaaaaaaaaa", "synthetic").leases
        nova.complete("tok.aaaaaaaaaaaa", lease, rkey(lease), run_s=0.1, warm=True)
        [check] = nova.claim("direct", "synthetic").leases
        nova.complete("direct", check, rkey(check), run_s=0.1, warm=True, meta=verdict)
    tl = client.get(f"/api/jobs/{job}/timeline").get_json()
    bars = {lane["name"]: [(b["task"], b["outcome"], b["css"].split()[0]) for b in lane["bars"]]
            for lane in tl["lanes"]}
    assert bars["newbie"] == [(0, "verified", "verified"), (1, "mismatch", "mismatch")]
    assert bars["checker"] == [(0, "agreed", "committed"), (1, "committed", "committed")]
    labels = [b["label"] for lane in tl["lanes"] for b in lane["bars"]]
    assert sum("verification" in x for x in labels) == 2


def test_the_event_text_of_a_check_by_a_re_run_and_by_a_backup():
    fields = {"job": "j", "task": "3", "worker": "w2", "name": "checker", "of": "w1",
              "lease_gen": "4"}
    names = {"w1": "maker"}
    rerun = Event("1-0", "verify_started", 0, {**fields, "free": "0"})
    backup = Event("1-1", "verify_started", 0, {**fields, "free": "1"})
    assert event_text(rerun, names) == "task 3: checker re-runs it to check maker's result"
    assert event_text(backup, names) == ("task 3: checker checks maker's result with its "
                                         "backup run")
