"""Commits as the worker's link sends them (one raw body: the commit's JSON, then the result)
and the one-script token lookup: the same fencing, limits and answers as a multipart
commit, against real Redis and a file store."""

from __future__ import annotations

import json

import pytest
from novatests.gateway import auth, join

from nova_queue import TaskSpec, protocol, tokens
from nova_queue.keys import result_key
from nova_queue.wire import COMMIT_LENGTH_HEADER, COMMIT_TYPE


def claim(gw, token: str, ids=("a1",)) -> dict:
    res = gw.post("/v1/claim", json={"app": "synthetic", "attempt_ids": list(ids)},
                  headers=auth(token))
    assert res.status_code == 200 and res.json["status"] == "ok", res.json
    return res.json["leases"][0]


def raw_commit(gw, token: str, lease: dict, data: bytes = b"png", key: str | None = None,
               head: bytes | None = None, length: str | None = None):
    """A raw complete of ``lease`` carrying ``data``; (response, key)."""
    key = key or result_key(lease["job_id"], lease["index"], lease["lease_gen"],
                            lease["attempt_id"], "png")
    fence = {k: lease[k] for k in ("task_id", "app", "lease_gen", "attempt_id")}
    commit = {"lease": fence, "key": key, "run_s": 0.1, "warm": True, "meta": {}}
    if head is None:
        head = json.dumps({"commit": commit, "content_type": "image/png",
                           "metadata": {"app": "synthetic"}}).encode()
    headers = {**auth(token), "Content-Type": COMMIT_TYPE,
               COMMIT_LENGTH_HEADER: length if length is not None else str(len(head))}
    return gw.post("/v1/complete", headers=headers, data=head + data), key


def test_a_raw_commit_stores_its_result_and_commits(gw, admin, make_token, gw_app):
    token = make_token("raw")
    wid = join(gw, token)
    admin.enqueue("synthetic", [TaskSpec("one", 1.0)])
    lease = claim(gw, token)
    res, key = raw_commit(gw, token, lease, b"\x89PNG raw bytes")
    assert res.status_code == 200 and res.json["job_finished"] is True, res.json
    obj = gw_app.extensions["nova_gateway"].store.get(key)
    assert obj.data == b"\x89PNG raw bytes" and obj.content_type == "image/png"
    assert obj.metadata["worker-id"] == wid and obj.metadata["app"] == "synthetic"
    res, _ = raw_commit(gw, token, lease, b"\x89PNG raw bytes")  # a retry: replayed
    assert res.status_code == 200 and res.json["replayed"] is True, res.json


def test_a_raw_commit_for_another_workers_lease_writes_nothing(gw, admin, make_token, gw_app):
    owner, thief = make_token("owner"), make_token("thief")
    join(gw, owner)
    join(gw, thief)
    admin.enqueue("synthetic", [TaskSpec("mine", 1.0)])
    lease = claim(gw, owner)
    store = gw_app.extensions["nova_gateway"].store
    res, key = raw_commit(gw, thief, lease, b"forged")
    assert res.status_code == 403 and res.json["kind"] == "stale"
    assert not store.exists(key)
    res, _ = raw_commit(gw, owner, lease)
    assert res.status_code == 200
    res, _ = raw_commit(gw, thief, lease, b"forged")  # once done: still refused, result kept
    assert res.status_code == 403 and store.get(key).data == b"png"


def test_a_raw_upload_to_another_attempts_key_is_refused(gw, admin, make_token, gw_app):
    token = make_token("keys")
    join(gw, token)
    admin.enqueue("synthetic", [TaskSpec("a", 1.0), TaskSpec("b", 1.0)])
    one, two = claim(gw, token, ids=("x1",)), claim(gw, token, ids=("x2",))
    other = result_key(two["job_id"], two["index"], two["lease_gen"], two["attempt_id"], "png")
    res, _ = raw_commit(gw, token, one, key=other)
    assert res.status_code == 403 and res.json["kind"] == "denied"
    assert not gw_app.extensions["nova_gateway"].store.exists(other)


def test_a_raw_result_over_the_limit_is_413(gw_settings, admin, make_token):
    import dataclasses

    from nova_queue.web.gateway import create_app

    app = create_app({"TESTING": True}, settings=dataclasses.replace(
        gw_settings, gateway_max_result_bytes=2048))
    gw = app.test_client()
    try:
        token = make_token("big")
        join(gw, token)
        admin.enqueue("synthetic", [TaskSpec("big", 1.0)])
        lease = claim(gw, token)
        res, key = raw_commit(gw, token, lease, b"x" * 4096)
        assert res.status_code == 413 and res.json["kind"] == "too_large"
        assert admin.task(lease["task_id"]).state == "leased"
        assert not app.extensions["nova_gateway"].store.exists(key)
    finally:
        app.extensions["nova_gateway"].close()


@pytest.mark.parametrize("head, length", [
    (b"not json", None), (b'["a list"]', None), (b'{"commit": 1}', None),
    (b"{}", "0"), (b"{}", "lots"), (b"{}", str(10**6)),
])
def test_malformed_raw_commits_are_400_and_write_nothing(gw, admin, make_token, gw_app, head,
                                                         length):
    token = make_token("bad")
    join(gw, token)
    admin.enqueue("synthetic", [TaskSpec("one", 1.0)])
    lease = claim(gw, token)
    res, key = raw_commit(gw, token, lease, head=head, length=length)
    assert res.status_code == 400 and res.json["kind"] == "input", res.json
    assert admin.task(lease["task_id"]).state == "leased"
    assert not gw_app.extensions["nova_gateway"].store.exists(key)


def test_unknown_and_revoked_tokens_are_401_and_leave_no_keys(gw, admin, make_token):
    admin.enqueue("synthetic", [TaskSpec("one", 1.0)])
    token = make_token("gone")
    join(gw, token)
    lease = claim(gw, token)
    tokens.revoke(admin, "gone")
    before = set(admin.redis.scan_iter(match=admin.keys.prefix + "*"))
    for bearer in (token, "not-a-token"):
        res, _ = raw_commit(gw, bearer, lease)
        assert res.status_code == 401 and res.json["kind"] == "token"
        res = gw.post("/v1/hello", json={"protocol": protocol.PROTOCOL}, headers=auth(bearer))
        assert res.status_code == 401
    # no rate window for an unknown token, no stub of the revoked one's hash
    assert set(admin.redis.scan_iter(match=admin.keys.prefix + "*")) == before


def test_last_used_is_written_by_the_lookup(gw, admin, make_token):
    make_token("seen")
    [record] = tokens.list_tokens(admin)
    assert record.last_used_ms is None
    token = tokens.create(admin, "seen2")
    join(gw, token)
    seen = {t.name: t.last_used_ms for t in tokens.list_tokens(admin)}
    assert seen["seen"] is None and seen["seen2"] and seen["seen2"] > 0
