"""A batch of commits through the gateway (``POST /v1/complete_batch``): up to 64 results of
one worker in one request, each written under its attempt's key, committed in one script and
answered on its own, refused and cleaned up as one commit is (a refused commit deletes only
its own result; a batch refused before the script writes nothing). The token is checked
before a byte of the body is read, and the body is bounded. Then the worker's link, which
cuts a batch into requests within the gateway's limits, and a real gateway worker, whose
cheap tasks are committed in batches as a direct worker's are. Against real Redis and a
file store."""

from __future__ import annotations

import dataclasses
import json
import logging
import threading

import pytest
from novatests.gateway import auth, fast_claim, gateway_worker, join
from novatests.seed import set_speed
from novatests.serving import served

from nova_queue import Settings, TaskSpec, wire
from nova_queue.client import BatchCommit
from nova_queue.errors import JobCancelledError
from nova_queue.keys import result_key
from nova_queue.limits import MAX_CLAIM_K
from nova_queue.local import wait_for
from nova_queue.models import CompleteResult
from nova_queue.serving import werkzeug_server
from nova_queue.stores import open_store
from nova_queue.workers.link import GatewayLink

FENCE = ("task_id", "app", "lease_gen", "attempt_id")


def key_of(lease: dict) -> str:
    return result_key(lease["job_id"], lease["index"], lease["lease_gen"],
                      lease["attempt_id"], "png")


def entry(lease: dict, **changes) -> dict:
    commit = {"lease": {k: lease[k] for k in FENCE}, "key": key_of(lease), "run_s": 0.1,
              "warm": True, "meta": {"i": lease["index"]}, **changes}
    return {"commit": commit, "content_type": "image/png", "metadata": {"app": "synthetic"}}


def send(gw, token: str, leases: list[dict], *, after=None, changes=None, datas=None):
    """POST one batch of ``leases`` as the link sends it (``changes``: {index: fields})."""
    changes = changes or {}
    datas = datas or [f"result {x['index']}".encode() for x in leases]
    [(_, head_bytes, body)] = wire.batch_bodies(
        [(entry(x, **changes.get(i, {})), d) for i, (x, d) in enumerate(zip(leases, datas))],
        after)
    return gw.post("/v1/complete_batch", data=body, headers={
        **auth(token), "Content-Type": wire.COMMIT_TYPE,
        wire.COMMIT_LENGTH_HEADER: str(head_bytes)})


def objects(gw_app, job: str) -> list[str]:
    return sorted(gw_app.extensions["nova_gateway"].store.list(f"jobs/{job}/"))


def test_a_batch_writes_commits_and_answers_each_then_claims(gw, gw_app, admin, make_token):
    token = make_token("batch")
    wid = join(gw, token)
    job = admin.enqueue("synthetic", [TaskSpec(f"t{i}", 1.0) for i in range(6)])
    leases = fast_claim(gw, admin, token, wid, 4)
    res = send(gw, token, leases, after={"app": "synthetic", "attempt_ids": ["n1", "n2"]})
    assert res.status_code == 200, res.json
    assert res.json["results"] == [{"job_finished": False, "replayed": False}] * 4
    assert [x["index"] for x in res.json["claimed"]["leases"]] == [4, 5]
    store = gw_app.extensions["nova_gateway"].store
    for x in leases:
        t = admin.task(x["task_id"])
        assert (t.state, t.worker_id, t.result) == ("done", wid, key_of(x))
        obj = store.get(key_of(x))
        assert obj.data == f"result {x['index']}".encode()
        assert (obj.metadata["worker-id"], obj.metadata["attempt-id"]) == (wid, x["attempt_id"])
    assert objects(gw_app, job) == sorted(key_of(x) for x in leases)
    # a retry after a lost reply: the same answers, replayed, nothing new written
    again = send(gw, token, leases)
    assert again.json["results"] == [{"job_finished": False, "replayed": True}] * 4
    assert admin.job(job, with_tasks=False).done == 4


def test_a_refused_commit_in_a_batch_deletes_only_its_own_result(gw, gw_app, admin,
                                                                 make_token):
    token = make_token("half")
    wid = join(gw, token)
    kept_job = admin.enqueue("synthetic", [TaskSpec("kept", 1.0)])
    [kept] = fast_claim(gw, admin, token, wid, 1)
    gone_job = admin.enqueue("synthetic", [TaskSpec("gone", 1.0)])
    [gone] = fast_claim(gw, admin, token, wid, 1)
    admin.cancel(gone_job)  # still leased (so written first), refused by the script
    res = send(gw, token, [kept, gone])
    assert res.status_code == 200, res.json
    ok, refused = res.json["results"]
    assert ok == {"job_finished": True, "replayed": False}
    assert refused["kind"] == "cancelled" and "cancelled" in refused["error"]
    assert objects(gw_app, kept_job) == [key_of(kept)]
    assert objects(gw_app, gone_job) == []
    answer = wire.commit_answer_from_json(refused, gone["task_id"])
    assert isinstance(answer, JobCancelledError) and answer.task_id == gone["task_id"]


@pytest.mark.parametrize("changes, after, status", [
    ({1: {"run_s": -1}}, None, 400),
    ({1: {"meta": {"x": "m" * 70_000}}}, None, 400),
    ({1: {"next": {"app": "synthetic", "attempt_ids": ["n1"]}}}, None, 400),
    ({}, {"app": "txt2img", "attempt_ids": ["n1"]}, 403),  # an app it did not register
    ({0: {"key": "jobs/x/results/0/g1-a0.png"}}, None, 403),  # another attempt's key
])
def test_a_batch_refused_before_the_script_writes_nothing(gw, gw_app, admin, make_token,
                                                          changes, after, status):
    token = make_token("refused")
    wid = join(gw, token)
    job = admin.enqueue("synthetic", [TaskSpec(f"t{i}", 1.0) for i in range(3)])
    leases = fast_claim(gw, admin, token, wid, 3)
    res = send(gw, token, leases, after=after, changes=changes)
    assert res.status_code == status, res.json
    assert objects(gw_app, job) == []
    assert {admin.task(x["task_id"]).state for x in leases} == {"leased"}
    assert send(gw, token, leases).status_code == 200  # well formed: committed
    assert objects(gw_app, job) == sorted(key_of(x) for x in leases)


def _raw(gw, headers: dict, body: bytes):
    return gw.post("/v1/complete_batch", data=body,
                   headers={"Content-Type": wire.COMMIT_TYPE, **headers})


def test_the_token_is_checked_before_the_body_is_read(gw_settings, caplog):
    from nova_queue.web.gateway import create_app

    app = create_app(settings=gw_settings)  # as it serves: an exception would be a 500
    try:
        gw = app.test_client()
        head = b'{"commits": ' + b"[" * 5000 + b"]" * 5000 + b"}"
        caplog.set_level(logging.DEBUG)
        for bearer in ({}, auth("not-a-token")):
            res = _raw(gw, {**bearer, wire.COMMIT_LENGTH_HEADER: str(len(head))}, head)
            assert res.status_code == 401 and res.json["kind"] == "token", res.data
        assert [r for r in caplog.records if r.name.startswith("nova_queue")
                or r.exc_info] == []  # nothing parsed: no refusal logged
    finally:
        app.extensions["nova_gateway"].close()


def test_a_batch_body_is_bounded(gw_settings, admin, make_token):
    from nova_queue.web.gateway import create_app

    app = create_app({"TESTING": True}, settings=dataclasses.replace(
        gw_settings, gateway_max_result_bytes=2048))
    gw = app.test_client()
    try:
        token = make_token("bounds")
        wid = join(gw, token)
        job = admin.enqueue("synthetic", [TaskSpec(f"t{i}", 1.0) for i in range(2)])
        leases = fast_claim(gw, admin, token, wid, 2)
        res = send(gw, token, leases, datas=[b"x" * 1500, b"y" * 1500])  # 3000 > 2048
        assert res.status_code == 413 and res.json["kind"] == "too_large", res.json
        [(_, head_bytes, body)] = wire.batch_bodies([(entry(x), b"r") for x in leases], None)
        bearer = auth(token)
        for headers, data in (
                ({wire.COMMIT_LENGTH_HEADER: str(head_bytes)}, body + b"more"),
                ({wire.COMMIT_LENGTH_HEADER: str(head_bytes)}, body[:-1]),
                ({wire.COMMIT_LENGTH_HEADER: str(wire.MAX_BATCH_HEAD_BYTES + 1)}, body),
                ({wire.COMMIT_LENGTH_HEADER: "0"}, body)):
            res = _raw(gw, {**bearer, **headers}, data)
            assert res.status_code == 400 and res.json["kind"] == "input", res.json
        many = json.dumps({"commits": [{**entry(leases[0]), "bytes": 0}]
                           * (MAX_CLAIM_K + 1)}).encode()
        res = _raw(gw, {**bearer, wire.COMMIT_LENGTH_HEADER: str(len(many))}, many)
        assert res.status_code == 400 and "1 to 64" in res.json["error"], res.json
        assert objects(app, job) == []
        assert {admin.task(x["task_id"]).state for x in leases} == {"leased"}
    finally:
        app.extensions["nova_gateway"].close()


def joined_link(url: str, admin, token: str, k: int, size: int = 8,
                meta=None) -> tuple[GatewayLink, str, list[BatchCommit]]:
    """A link that joined through the gateway at ``url``, with ``k`` leases of a job of
    ``k + 2`` tasks claimed and their results (``size`` bytes) uploaded: the commits."""
    link = GatewayLink(Settings(gateway_url=url, worker_token=token))
    hello = link.hello(threading.Event())
    assert hello is not None
    wid = hello["worker_id"]
    link.register_worker(wid, {"name": "link"}, ["synthetic"])
    set_speed(admin, wid, "synthetic", 0.01)
    admin.enqueue("synthetic", [TaskSpec(f"t{i}", 1.0) for i in range(k + 2)])
    leases = link.claim(wid, "synthetic", k).leases
    assert len(leases) == k
    commits = []
    for x in leases:
        key = result_key(x.job_id, x.index, x.lease_gen, x.attempt_id, "png")
        link.upload(key, bytes([x.index]) * size, "image/png", {"attempt-id": x.attempt_id})
        commits.append(BatchCommit(x, key, 0.1, True, (meta or {}).get(x.index, {})))
    return link, wid, commits


def test_the_link_cuts_a_batch_within_the_gateways_limits(gw_settings, admin, make_token):
    """Results of 1500 bytes against a limit of 2048: one request each, the claim with the
    last; every commit answered, in order."""
    from nova_queue.web.gateway import create_app

    settings = dataclasses.replace(gw_settings, gateway_max_result_bytes=2048)
    app = create_app(settings=settings)
    with served(werkzeug_server(app), app.extensions["nova_gateway"].close) as port:
        link, wid, commits = joined_link(f"http://127.0.0.1:{port}", admin,
                                         make_token("cut"), 3, size=1500)
        assert link.batches and link.max_result_bytes == 2048
        res = link.complete_batch(wid, commits, app="synthetic", k=2)
        assert [type(r) for r in res.results] == [CompleteResult] * 3
        assert res.claimed is not None and [x.index for x in res.claimed.leases] == [3, 4]
        store = app.extensions["nova_gateway"].store
        for c in commits:
            assert store.get(c.result_key).data == bytes([c.lease.index]) * 1500
            assert admin.task(c.lease.task_id).state == "done"


def test_a_gateway_without_batches_gets_a_batch_one_commit_at_a_time(live_gateway, gw_app,
                                                                    admin, make_token):
    """A gateway of the earlier release offers no ``complete_batch`` in its hello: the link
    sends each commit alone, the claim with the last, and answers as a batch does (a
    refused commit refused alone)."""
    link, wid, commits = joined_link(live_gateway, admin, make_token("older"), 3,
                                     meta={1: {"x": "m" * 70_000}})
    link.batches = False  # what the earlier release's hello says
    res = link.complete_batch(wid, commits, app="synthetic", k=2)
    assert [type(r).__name__ for r in res.results] == [
        "CompleteResult", "InputError", "CompleteResult"]
    assert res.claimed is not None and len(res.claimed.leases) == 2
    states = [admin.task(c.lease.task_id).state for c in commits]
    assert states == ["done", "leased", "done"]
    store = gw_app.extensions["nova_gateway"].store
    assert [store.exists(c.result_key) for c in commits] == [True, False, True]


@pytest.mark.slow
def test_a_gateway_worker_commits_cheap_tasks_in_batches(live_gateway, admin, make_token,
                                                        tmp_path, namespace):
    """A real ``worker --gateway`` with no-op tasks (its speed seeded once it joined: its
    claims get several): their results go in batched commits (a ``completed_many`` entry
    per batch in the event stream), as a direct worker's do."""
    token = make_token("cheap")
    job = admin.enqueue("synthetic", [TaskSpec(f"t{i}", 0.001) for i in range(150)],
                        params={"seconds": 0, "size": 64})
    w = gateway_worker(live_gateway, token, namespace, tmp_path / "w", "--app", "synthetic",
                       "--no-benchmark", "--burst", name="cheap")
    try:
        wid = wait_for(lambda: admin.eligible_workers("synthetic"), timeout_s=60,
                       message="the worker to join")[0]
        set_speed(admin, wid, "synthetic", 0.001)
        assert w.wait(180) == 0, w.output()
        st = admin.job(job)
        assert (st.state, st.done) == ("done", 150), w.output()[-3000:]
        raw = admin.redis.xrange(admin.keys.events(), count=100_000)
        batches = [f for _, f in raw if f.get("type") == "completed_many"]
        assert batches, "no batched commit: " + w.output()[-3000:]
    finally:
        w.close()
    store = open_store(admin.settings.resolved_store_url)
    assert sorted(store.list(f"jobs/{job}/")) == sorted(t.result for t in st.tasks)
