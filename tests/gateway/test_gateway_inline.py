"""Small results through the gateway are held in Redis, not stored (nova_queue/results.py):
a commit's or a batch's results at most ``NOVA_INLINE_RESULT_BYTES`` go with the commit
script (written only when the fence holds); larger ones in the same batch go to the store as
before. Against real Redis and a file store."""

from __future__ import annotations

import dataclasses
import json

import pytest
from novatests.gateway import auth, fast_claim, join

from nova_queue import TaskSpec, wire
from nova_queue.keys import result_key
from nova_queue.results import Results

FENCE = ("task_id", "app", "lease_gen", "attempt_id")


def key_of(lease: dict) -> str:
    return result_key(lease["job_id"], lease["index"], lease["lease_gen"],
                      lease["attempt_id"], "txt")


def head(lease: dict) -> dict:
    commit = {"lease": {k: lease[k] for k in FENCE}, "key": key_of(lease), "run_s": 0.1,
              "warm": True, "meta": {"content_type": "text/plain"}}
    return {"commit": commit, "content_type": "text/plain", "metadata": {}}


def commit(gw, token: str, lease: dict, data: bytes):
    """One raw complete, as the worker's link sends it."""
    body = json.dumps(head(lease)).encode()
    return gw.post("/v1/complete", data=body + data, headers={
        **auth(token), "Content-Type": wire.COMMIT_TYPE, wire.COMMIT_LENGTH_HEADER: str(len(body))})


def send(gw, token: str, leases: list[dict], datas: list[bytes]):
    """One batch, as the worker's link sends it."""
    [(_, head_bytes, body)] = wire.batch_bodies(
        [(head(x), d) for x, d in zip(leases, datas)], None)
    return gw.post("/v1/complete_batch", data=body, headers={
        **auth(token), "Content-Type": wire.COMMIT_TYPE,
        wire.COMMIT_LENGTH_HEADER: str(head_bytes)})


@pytest.fixture
def gw_settings(gw_settings):
    """The gateway's settings with results up to 64 bytes held in Redis."""
    return dataclasses.replace(gw_settings, inline_result_bytes=64)


def test_a_small_result_is_held_in_redis_and_a_stale_one_is_not(gw, gw_app, admin, make_token):
    token, thief = make_token("small"), make_token("thief")
    wid = join(gw, token)
    join(gw, thief)
    job = admin.enqueue("synthetic", [TaskSpec("one", 1.0)])
    [lease] = fast_claim(gw, admin, token, wid, 1)
    store = gw_app.extensions["nova_gateway"].store
    held = Results(admin.redis, admin.keys, store)
    res = commit(gw, thief, lease, b"forged")  # not the thief's lease: nothing kept
    assert res.status_code == 403
    assert admin.redis.exists(admin.keys.inline(lease["task_id"])) == 0
    res = commit(gw, token, lease, b"small result")
    assert res.status_code == 200 and res.json["job_finished"] is True, res.json
    assert list(store.list(f"jobs/{job}/")) == []  # nothing in the store
    obj = held.get(key_of(lease))
    assert (obj.data, obj.content_type) == (b"small result", "text/plain")
    res = commit(gw, token, lease, b"small result")  # a retry: replayed
    assert res.status_code == 200 and res.json["replayed"] is True


def test_a_batch_holds_its_small_results_and_stores_the_large_ones(gw, gw_app, admin,
                                                                   make_token):
    token = make_token("mixed")
    wid = join(gw, token)
    job = admin.enqueue("synthetic", [TaskSpec(f"t{i}", 1.0) for i in range(3)])
    leases = fast_claim(gw, admin, token, wid, 3)
    datas = [b"tiny 0", b"L" * 65, b"tiny 2"]  # the middle one is past the 64 bytes
    res = send(gw, token, leases, datas)
    assert res.status_code == 200, res.json
    store = gw_app.extensions["nova_gateway"].store
    assert list(store.list(f"jobs/{job}/")) == [key_of(leases[1])]
    held = Results(admin.redis, admin.keys, store)
    assert [held.get(key_of(x)).data for x in leases] == datas
    assert admin.job(job, with_tasks=False).done == 3
    again = send(gw, token, leases, datas)  # a retry: replayed, nothing new
    assert again.json["results"] == [{"job_finished": False, "replayed": True}] * 3
    assert list(store.list(f"jobs/{job}/")) == [key_of(leases[1])]
