"""The gateway's calls one by one through Flask's test client, against real Redis and a
file store: identity, fencing, apps and labels, uploads, the protocol check."""

from __future__ import annotations

import json
import time

import pytest
from novatests.gateway import FIELDS, auth, claim, commit, join

from nova_queue import TaskSpec, protocol, tokens
from nova_queue.keys import result_key


def test_a_task_through_the_gateway_end_to_end(gw, admin, make_token, gw_app):
    token = make_token("pc1")
    wid = join(gw, token)
    assert wid.startswith("pc1.")
    job = admin.enqueue("synthetic", [TaskSpec("one", 1.0)])
    res = claim(gw, token)
    assert res.json["status"] == "ok", res.json
    lease = res.json["leases"][0]
    res, key = commit(gw, token, lease)
    assert res.status_code == 200 and res.json["job_finished"] is True
    t = admin.task(lease["task_id"])
    assert (t.state, t.worker_id, t.result) == ("done", wid, key)
    obj = gw_app.extensions["nova_gateway"].store.get(key)
    assert obj.data == b"png" and obj.metadata["worker-id"] == wid
    assert [w.token for w in admin.workers()] == ["pc1"]
    assert admin.job(job, with_tasks=False).done == 1


def test_missing_bad_and_revoked_tokens_are_401(gw, admin, make_token):
    assert gw.post("/v1/hello", json={"protocol": protocol.PROTOCOL}).status_code == 401
    assert gw.post("/v1/hello", json={"protocol": protocol.PROTOCOL},
                   headers=auth("not-a-token")).status_code == 401
    token = make_token("gone")
    join(gw, token)
    tokens.revoke(admin, "gone")
    res = claim(gw, token)
    assert res.status_code == 401 and res.json["kind"] == "token"


def test_revoking_releases_the_workers_leases_at_once(gw, admin, make_token):
    token = make_token("rev")
    wid = join(gw, token)
    admin.enqueue("synthetic", [TaskSpec("held", 1.0)])
    lease = claim(gw, token).json["leases"][0]
    worker, released = tokens.revoke(admin, "rev")
    assert (worker, released) == (wid, 1)
    t = admin.task(lease["task_id"])
    assert t.state == "pending" and t.attempt_count == 0  # given back: no attempt used


def test_another_workers_lease_is_refused_and_its_result_kept(gw, admin, make_token, gw_app):
    owner, thief = make_token("owner"), make_token("thief")
    join(gw, owner)
    join(gw, thief)
    admin.enqueue("synthetic", [TaskSpec("mine", 1.0)])
    lease = claim(gw, owner).json["leases"][0]
    store = gw_app.extensions["nova_gateway"].store
    res, key = commit(gw, thief, lease, b"forged")  # the owner's lease, with its key
    assert res.status_code == 403 and res.json["kind"] == "stale"
    assert not store.exists(key)  # nothing written for a worker that does not hold it
    assert any(e.type == "stale_rejected" for e in admin.events(count=1000))  # counted
    res, _ = commit(gw, owner, lease)
    assert res.status_code == 200
    res, _ = commit(gw, thief, lease, b"forged")  # again, once it is done
    assert res.status_code == 403 and store.get(key).data == b"png"  # kept, not deleted
    t = admin.task(lease["task_id"])
    assert t.state == "done" and t.result == key


def test_an_upload_to_another_attempts_key_is_refused(gw, admin, make_token, gw_app):
    token = make_token("keys")
    join(gw, token)
    admin.enqueue("synthetic", [TaskSpec("a", 1.0), TaskSpec("b", 1.0)])
    (one,) = claim(gw, token, ids=("x1",)).json["leases"]
    (two,) = claim(gw, token, ids=("x2",)).json["leases"]
    other_key = result_key(two["job_id"], two["index"], two["lease_gen"], two["attempt_id"],
                           "png")
    res, _ = commit(gw, token, one, key=other_key)
    assert res.status_code == 403 and res.json["kind"] == "denied"
    assert not gw_app.extensions["nova_gateway"].store.exists(other_key)
    res = gw.post("/v1/complete", headers=auth(token), json={"lease": one, "key": other_key})
    assert res.status_code == 400 and "multipart" in res.json["error"]


def test_apps_and_labels_are_the_tokens(gw, admin, make_token):
    token = make_token("lab", apps=("synthetic",), labels={"gpu": "4090"})
    res = gw.post("/v1/hello", json={"protocol": protocol.PROTOCOL}, headers=auth(token))
    wid = res.json["worker_id"]
    res = gw.post("/v1/register", json={"fields": FIELDS, "apps": ["txt2img"]},
                  headers=auth(token, wid))
    assert res.status_code == 403 and "txt2img" in res.json["error"]
    forged = {**FIELDS, "labels": json.dumps({"backend": "cpu", "site": "lab"})}
    res = gw.post("/v1/register", json={"fields": forged, "apps": ["synthetic"]},
                  headers=auth(token, wid))
    assert res.status_code == 403 and "site=lab" in res.json["error"]
    join(gw, token)
    (w,) = [w for w in admin.workers() if w.alive]
    assert w.labels["gpu"] == "4090" and w.labels["backend"] == "cpu"
    pinned = make_token("pinned", labels={"backend": "cuda"})
    res = gw.post("/v1/hello", json={"protocol": protocol.PROTOCOL}, headers=auth(pinned))
    res = gw.post("/v1/register", json={"fields": FIELDS, "apps": ["synthetic"]},
                  headers=auth(pinned, res.json["worker_id"]))
    assert res.status_code == 403 and "backend=cpu" in res.json["error"]  # contradicts it
    res = claim(gw, token, app="txt2img")
    assert res.status_code == 403


def test_an_older_process_of_a_token_is_refused(gw, make_token):
    token = make_token("twice")
    first = join(gw, token)
    second = join(gw, token)
    assert first != second
    res = gw.post("/v1/renew", json={"leases": []}, headers=auth(token, first))
    assert res.status_code == 403 and "another worker process" in res.json["error"]
    assert gw.post("/v1/renew", json={"leases": []},
                   headers=auth(token, second)).status_code == 200


def test_protocol_mismatch_is_a_clear_error(gw, make_token, admin):
    token = make_token("old")
    res = gw.post("/v1/hello", json={"protocol": 1}, headers=auth(token))
    assert res.status_code == 409 and "protocol 1" in res.json["error"]
    admin.redis.hset(admin.keys.meta(), protocol.FIELD, "99")
    res = gw.post("/v1/hello", json={"protocol": protocol.PROTOCOL}, headers=auth(token))
    assert res.status_code == 409 and "99" in res.json["error"]


@pytest.fixture
def small(gw_settings, tmp_path):
    import dataclasses

    from nova_queue.web.gateway import create_app

    settings = dataclasses.replace(gw_settings, gateway_max_result_bytes=2048,
                                   gateway_rate_per_min=5)
    app = create_app({"TESTING": True}, settings=settings)
    yield app.test_client()
    app.extensions["nova_gateway"].close()


def test_results_over_the_size_limit_are_413(small, admin, make_token):
    token = make_token("big")
    join(small, token)
    admin.enqueue("synthetic", [TaskSpec("big", 1.0)])
    lease = claim(small, token).json["leases"][0]
    res, _ = commit(small, token, lease, b"x" * 4096)
    assert res.status_code == 413 and res.json["kind"] == "too_large"
    assert admin.task(lease["task_id"]).state == "leased"  # nothing committed


def test_the_rate_limit_is_429_with_retry_after(small, make_token):
    token = make_token("fast")
    codes = [small.post("/v1/hello", json={"protocol": protocol.PROTOCOL}, headers=auth(token)).status_code
             for _ in range(7)]
    assert codes[:5] == [200] * 5 and codes[5:] == [429, 429]
    res = small.post("/v1/hello", json={"protocol": protocol.PROTOCOL}, headers=auth(token))
    assert 1 <= int(res.headers["Retry-After"]) <= 61


def test_tokens_are_stored_hashed_and_listed(admin, make_token):
    token = make_token("listed", apps=("synthetic",), labels={"site": "lab"})
    raw = json.dumps({k: admin.redis.hgetall(k) for k in admin.redis.scan_iter(
        match=admin.keys.prefix + "*")})
    assert token not in raw and tokens.digest(token) in raw
    (t,) = tokens.list_tokens(admin)
    assert (t.name, t.apps, dict(t.labels)) == ("listed", ("synthetic",), {"site": "lab"})
    with pytest.raises(Exception, match="exists"):
        tokens.create(admin, "listed")
    with pytest.raises(Exception, match="invalid token name"):
        tokens.create(admin, "bad name")


def test_a_claim_long_polls_and_wakes_when_work_arrives(gw_app, admin, make_token):
    import threading

    gw = gw_app.test_client()
    token = make_token("poll")
    join(gw, token)
    out = {}

    def ask():
        started = time.monotonic()
        out["res"] = claim(gw_app.test_client(), token, wait_ms=8000).json
        out["s"] = time.monotonic() - started

    thread = threading.Thread(target=ask)
    thread.start()
    time.sleep(0.5)  # the fault under test: work arrives while the claim waits
    admin.enqueue("synthetic", [TaskSpec("late", 1.0)])
    thread.join(15)
    assert out["res"]["status"] == "ok" and out["s"] < 6, out


@pytest.mark.parametrize("path, body", [
    ("/v1/claim", {"app": "synthetic", "attempt_ids": ["a"], "wait_ms": "soon"}),
    ("/v1/claim", {"app": "synthetic", "attempt_ids": []}),
    ("/v1/register", {"fields": {}, "apps": ["synthetic"], "bench": []}),
    ("/v1/renew", {"leases": [["t:0", "x", "a"]]}),
    ("/v1/complete", {"lease": {"task_id": "t:0"}, "key": "k"}),  # not multipart
    ("/v1/fail", {"lease": {"task_id": "j:0", "app": "synthetic", "lease_gen": 1,
                            "attempt_id": "a"}, "kind": "bogus"}),
    ("/v1/renew", ["not", "an", "object"]),
])
def test_malformed_bodies_are_400_and_write_nothing(gw, admin, make_token, path, body):
    token = make_token("bad-input")
    wid = join(gw, token)
    before = admin.redis.hgetall(admin.keys.worker(wid))
    res = gw.post(path, json=body, headers=auth(token, wid))
    assert res.status_code == 400 and res.json["kind"] == "input", res.json
    assert admin.redis.hgetall(admin.keys.worker(wid)) == before


def test_quarantine_and_time_limits_reach_the_worker(gw, admin, make_token):
    """A quarantined worker's claims answer why; a lease past its run-time limit is
    reported lost with its reason, as in direct mode."""
    token = make_token("q")
    wid = join(gw, token)
    admin.enqueue("synthetic", [TaskSpec("slow", 1.0)], timeout_s=0.001)
    lease = claim(gw, token).json["leases"][0]
    res = wire_renew(gw, token, lease)
    deadline = time.monotonic() + 10
    while not res["lost"] and time.monotonic() < deadline:
        res = wire_renew(gw, token, lease)
    assert res["lost"] == [lease["task_id"]] and res["reasons"][lease["task_id"]] == "timeout"
    admin.set_quarantine(wid, True, reason="by hand")
    res = claim(gw, token).json
    assert res["status"] == "quarantined" and "by hand" in res["reason"]


def wire_renew(gw, token, lease) -> dict:
    res = gw.post("/v1/renew", headers=auth(token), json={
        "leases": [[lease["task_id"], lease["lease_gen"], lease["attempt_id"]]]})
    assert res.status_code == 200, res.json
    return res.json


def test_a_prepare_failure_through_the_gateway_hands_back_and_marks(gw, admin, make_token,
                                                                    gw_settings):
    """Kind ``prepare``: no attempt used, the worker marked for the gateway's own
    NOVA_CANNOT_RUN_S (not a time the worker sends); its next claim is told to wait."""
    token = make_token("noprep")
    wid = join(gw, token)
    job = admin.enqueue("synthetic", [TaskSpec("one", 1.0)])
    lease = claim(gw, token).json["leases"][0]
    fence = {k: lease[k] for k in ("task_id", "app", "lease_gen", "attempt_id")}
    res = gw.post("/v1/fail", headers=auth(token), json={
        "lease": fence, "kind": "prepare", "message": "No module named 'torch'",
        "mark_ms": 1})  # a field the gateway ignores
    assert res.status_code == 200 and res.json["state"] == "pending", res.json
    t = admin.task(lease["task_id"])
    assert (t.state, t.attempt_count) == ("pending", 0)
    [w] = [w for w in admin.workers() if w.worker_id == wid]
    [mark] = w.cannot_run
    assert (mark.app, mark.model, mark.reason) == ("synthetic", "", "No module named 'torch'")
    assert mark.until_ms - mark.since_ms == gw_settings.cannot_run_s * 1000
    assert claim(gw, token, ids=("a2",)).json["status"] == "wait"
    assert admin.job(job, with_tasks=False).failed == 0


def test_an_invalid_output_through_the_gateway_is_handed_back_as_the_workers_fault(
        gw, admin, make_token):
    """Kind ``invalid`` (issue 31: the app's validate rejected the output): as prepare, no
    attempt used and the worker marked with the reason, and a failure of the worker."""
    token = make_token("black")
    wid = join(gw, token)
    admin.enqueue("synthetic", [TaskSpec("one", 1.0)])
    lease = claim(gw, token).json["leases"][0]
    fence = {k: lease[k] for k in ("task_id", "app", "lease_gen", "attempt_id")}
    res = gw.post("/v1/fail", headers=auth(token), json={
        "lease": fence, "kind": "invalid", "message": "invalid output: all-black image"})
    assert res.status_code == 200 and res.json["state"] == "pending", res.json
    assert admin.task(lease["task_id"]).attempt_count == 0
    [w] = [w for w in admin.workers() if w.worker_id == wid]
    assert [m.reason for m in w.cannot_run] == ["invalid output: all-black image"]


def test_the_price_is_the_tokens(gw, admin):
    token = tokens.create(admin, "rented", trust="trusted", cost_per_hour=2.5)
    join(gw, token, fields={**FIELDS, "price": 0.01})  # a worker cannot set its own price
    (w,) = admin.workers()
    assert w.cost_per_hour == 2.5 and w.to_json()["cost_per_hour"] == 2.5
    assert [t.to_json()["cost_per_hour"] for t in tokens.list_tokens(admin)] == [2.5]
