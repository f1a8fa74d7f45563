"""A commit the gateway refuses leaves nothing in the store: everything it can check is
checked before the result is written, and what the scripts refuse after the write is
deleted (only the refused attempt's own object: a committed result is never touched).
Bodies are parsed only after the token is checked, and JSON nested too deeply is a 400 with
one log line. Against real Redis and a file store, through Flask's test client."""

from __future__ import annotations

import io
import json
import logging

import pytest
from novatests.gateway import auth, gateway_worker, join

from nova_queue import TaskSpec
from nova_queue.keys import result_key
from nova_queue.limits import MAX_INPUT_BYTES, MAX_META_BYTES
from nova_queue.web.gateway import create_app
from nova_queue.wire import COMMIT_LENGTH_HEADER, COMMIT_TASK_HEADER, COMMIT_TYPE


def claim(gw, token: str, ids=("a1",)) -> dict:
    res = gw.post("/v1/claim", json={"app": "synthetic", "attempt_ids": list(ids)},
                  headers=auth(token))
    assert res.status_code == 200 and res.json["status"] == "ok", res.json
    return res.json["leases"][0]


def lease_key(lease: dict) -> str:
    return result_key(lease["job_id"], lease["index"], lease["lease_gen"],
                      lease["attempt_id"], "png")


def raw_commit(gw, token: str, lease: dict, data: bytes = b"png", *, head: bytes | None = None,
               **changes):
    """A raw complete of ``lease`` (as the worker's link sends it), its commit's fields
    replaced by ``changes``."""
    fence = {k: lease[k] for k in ("task_id", "app", "lease_gen", "attempt_id")}
    commit = {"lease": fence, "key": lease_key(lease), "run_s": 0.1, "warm": True, "meta": {},
              **changes}
    if head is None:
        head = json.dumps({"commit": commit, "content_type": "image/png",
                           "metadata": {"app": "synthetic"}}).encode()
    headers = {**auth(token), "Content-Type": COMMIT_TYPE, COMMIT_LENGTH_HEADER: str(len(head)),
               COMMIT_TASK_HEADER: lease["task_id"]}
    return gw.post("/v1/complete", headers=headers, data=head + data)


def form_commit(gw, token: str, lease: dict, data: bytes = b"png", **changes):
    """A multipart complete of ``lease`` (what the first release's link sends), its
    commit's fields replaced by ``changes`` (no 64 KiB limit on its JSON)."""
    fence = {k: lease[k] for k in ("task_id", "app", "lease_gen", "attempt_id")}
    commit = {"lease": fence, "key": lease_key(lease), "run_s": 0.1, "warm": True, "meta": {},
              **changes}
    return gw.post("/v1/complete", headers=auth(token), data={
        "commit": json.dumps(commit), "content_type": "image/png",
        "metadata": json.dumps({"app": "synthetic"}), "data": (io.BytesIO(data), "result")})


def objects(gw_app, lease: dict) -> list[str]:
    return list(gw_app.extensions["nova_gateway"].store.list(f"jobs/{lease['job_id']}/"))


@pytest.mark.parametrize("send", [raw_commit, form_commit])
@pytest.mark.parametrize("changes, status", [
    ({"run_s": -1}, 400),                                   # the probe's case
    ({"run_s": float("nan")}, 400),                         # json.dumps writes NaN
    ({"run_s": "soon"}, 400),
    ({"next": {"app": "txt2img", "attempt_ids": ["n1"]}}, 403),  # an app it did not register
    ({"next": {"app": "synthetic", "attempt_ids": ["bad id!"]}}, 400),
])
def test_a_refused_commit_leaves_no_object(gw, admin, make_token, gw_app, changes, status,
                                           send):
    token = make_token("refused")
    join(gw, token)
    admin.enqueue("synthetic", [TaskSpec("one", 1.0)])
    lease = claim(gw, token)
    res = send(gw, token, lease, **changes)
    assert res.status_code == status, res.json
    assert objects(gw_app, lease) == []
    assert admin.task(lease["task_id"]).state == "leased"
    res = send(gw, token, lease)  # the same attempt, well formed: committed and kept
    assert res.status_code == 200, res.json
    assert objects(gw_app, lease) == [lease_key(lease)]


def test_metadata_over_the_scripts_limit_is_refused_before_the_write(gw, admin, make_token,
                                                                    gw_app):
    token = make_token("meta")
    join(gw, token)
    admin.enqueue("synthetic", [TaskSpec("one", 1.0)])
    lease = claim(gw, token)
    res = form_commit(gw, token, lease, meta={"x": "m" * MAX_META_BYTES})
    assert res.status_code == 400 and "meta" in res.json["error"], res.json
    assert objects(gw_app, lease) == []


def test_a_commit_the_fence_refuses_after_the_write_deletes_its_object(gw, admin, make_token,
                                                                      gw_app):
    token = make_token("late")
    join(gw, token)
    job = admin.enqueue("synthetic", [TaskSpec("one", 1.0)])
    lease = claim(gw, token)
    admin.cancel(job)  # still leased (so written first), refused by the script
    res = raw_commit(gw, token, lease)
    assert res.status_code == 403 and res.json["kind"] == "stale", res.json
    assert objects(gw_app, lease) == []


def test_a_refused_replay_never_deletes_a_committed_result(gw, admin, make_token, gw_app):
    owner, thief = make_token("owner"), make_token("thief")
    join(gw, owner)
    join(gw, thief)
    admin.enqueue("synthetic", [TaskSpec("one", 1.0)])
    lease = claim(gw, owner)
    assert raw_commit(gw, owner, lease, b"the result").status_code == 200
    for token, changes in ((owner, {"run_s": -1}), (owner, {"meta": {"x": "m" * 70_000}}),
                           (thief, {}), (owner, {"next": {"app": "nope",
                                                          "attempt_ids": ["n1"]}})):
        res = raw_commit(gw, token, lease, b"other bytes", **changes)
        assert res.status_code in (400, 403), res.json
    store = gw_app.extensions["nova_gateway"].store
    assert objects(gw_app, lease) == [lease_key(lease)]
    assert store.get(lease_key(lease)).data == b"the result"
    assert admin.task(lease["task_id"]).result == lease_key(lease)


def _deep(levels: int) -> bytes:
    return b'{"commit": ' + b"[" * levels + b"]" * levels + b"}"


@pytest.fixture
def served(gw_settings):
    """The gateway app as it serves (not in testing mode: an exception is a 500 and a
    logged traceback, as a real server answers it)."""
    app = create_app(settings=gw_settings)
    yield app
    app.extensions["nova_gateway"].close()


def _records(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith(("nova_queue", "flask"))
            or r.exc_info]


def test_deep_json_without_a_token_is_401_unparsed(served, caplog):
    gw = served.test_client()
    head = _deep(5000)
    caplog.set_level(logging.DEBUG)
    for bearer in ({}, auth("not-a-token")):
        res = gw.post("/v1/complete", data=head + b"png", headers={
            **bearer, "Content-Type": COMMIT_TYPE, COMMIT_LENGTH_HEADER: str(len(head))})
        assert res.status_code == 401 and res.json["kind"] == "token", res.data
        res = gw.post("/v1/register", data=head, headers={
            **bearer, "Content-Type": "application/json"})
        assert res.status_code == 401, res.data
    assert _records(caplog) == []  # nothing parsed: no refusal logged, no traceback


@pytest.mark.parametrize("levels", [33, 5000, 30_000])
def test_deep_json_with_a_token_is_400_and_one_log_line(served, admin, make_token, caplog,
                                                       levels):
    gw = served.test_client()
    token = make_token("deep")
    join(gw, token)
    admin.enqueue("synthetic", [TaskSpec("one", 1.0)])
    lease = claim(gw, token)
    head = _deep(levels)
    caplog.set_level(logging.DEBUG)
    res = raw_commit(gw, token, lease, head=head)
    assert res.status_code == 400 and res.json["kind"] == "input", res.data
    assert "nested deeper than 32" in res.json["error"]
    [record] = _records(caplog)
    assert record.exc_info is None and "\n" not in record.getMessage()
    assert "/v1/complete" in record.getMessage() and "[[" not in record.getMessage()
    caplog.clear()
    res = gw.post("/v1/renew", data=b'{"leases": ' + b"[" * levels + b"]" * levels + b"}",
                  headers={**auth(token), "Content-Type": "application/json"})
    assert res.status_code == 400 and res.json["kind"] == "input", res.data
    assert len(_records(caplog)) == 1
    assert admin.task(lease["task_id"]).state == "leased" and objects(served, lease) == []


def test_json_of_ordinary_depth_still_parses(gw, admin, make_token):
    token = make_token("fine")
    join(gw, token)
    admin.enqueue("synthetic", [TaskSpec("one", 1.0)])
    lease = claim(gw, token)
    nested = {"a": [[[[{"b": [1, 2, {"c": "[[[[ not nesting ]]]]"}]}]]]]}
    res = raw_commit(gw, token, lease, meta={"nested": json.dumps(nested), "deep": nested})
    assert res.status_code == 200, res.json


@pytest.mark.slow
def test_a_gateway_worker_whose_commit_is_refused_runs_on(live_gateway, admin, make_token,
                                                         gw_app, tmp_path, namespace):
    """A real worker behind the gateway: a prompt of the largest size makes its commit
    larger than the gateway takes (400). The worker fails that task and runs on (before, it
    exited with the error); the gateway wrote nothing for it, the other result stays."""
    token = make_token("runs-on")
    job = admin.enqueue("synthetic", [TaskSpec("x" * MAX_INPUT_BYTES, 0.01),
                                      TaskSpec("fine", 0.01)],
                        params={"seconds": 0.01, "size": 64}, max_attempts=1)
    w = gateway_worker(live_gateway, token, namespace, tmp_path / "w", "--app", "synthetic",
                       "--no-benchmark", "--burst", name="runs-on")
    try:
        assert w.wait(120) == 0, w.output()
    finally:
        w.close()
    refused, fine = admin.job(job).tasks
    assert (refused.state, fine.state) == ("failed", "done"), w.output()
    assert "its commit was refused" in refused.error
    store = gw_app.extensions["nova_gateway"].store
    assert list(store.list(f"jobs/{job}/")) == [fine.result]


@pytest.mark.parametrize("path, body", [
    ("/v1/claim", '{"app": "synthetic", "attempt_ids": ["a"], "wait_ms": 1e400}'),
    ("/v1/claim", '{"app": "synthetic", "attempt_ids": ["a"], "wait_ms": Infinity}'),
    ("/v1/fail", ('{"lease": {"task_id": "j:0", "app": "synthetic", "lease_gen": 1,'
                  ' "attempt_id": "a"}, "kind": "error", "batch": 1e400}')),
    ("/v1/fail", ('{"lease": {"task_id": "j:0", "app": "synthetic", "lease_gen": 1e400,'
                  ' "attempt_id": "a"}, "kind": "error"}')),
    ("/v1/loaded", '{"app": "synthetic", "model": "m", "load_s": 1' + "0" * 400 + "}"),
    ("/v1/renew", '{"leases": [["j:0", 1e400, "a"]]}'),
    ("/v1/register", ('{"fields": {}, "apps": ["synthetic"], "bench": {"synthetic":'
                      ' {"bench_s": NaN}}}')),
])
def test_numbers_that_do_not_fit_are_400_not_a_traceback(served, make_token, caplog, path,
                                                         body):
    """Numbers JSON can carry but Python cannot convert (1e400 is infinity, an integer of
    401 digits overflows a float) and NaN/Infinity (not JSON) are refused as input."""
    gw = served.test_client()
    token = make_token("numbers")
    wid = join(gw, token)
    caplog.set_level(logging.DEBUG)
    res = gw.post(path, data=body, headers={**auth(token, wid),
                                            "Content-Type": "application/json"})
    assert res.status_code == 400 and res.json["kind"] == "input", res.data
    assert not [r for r in caplog.records if r.exc_info]
