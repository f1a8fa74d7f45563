"""The live protocol over real WebSockets against a real threaded server: snapshot on
connect, deltas as state changes in Redis, resume with ?after=, Origin checks."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest
import websocket
from novatests.web import StandInWorker, enqueue, unlocked_cookie

TIMEOUT_S = 10.0


def connect(base: str, path: str, **kw):
    """A socket of an unlocked session (the test gallery has a web token)."""
    kw.setdefault("cookie", unlocked_cookie(base))
    return websocket.create_connection(base.replace("http://", "ws://", 1) + path,
                                       timeout=TIMEOUT_S, **kw)


def recv(ws) -> dict:
    return json.loads(ws.recv())


def recv_until(ws, predicate, timeout_s: float = TIMEOUT_S) -> list[dict]:
    """Messages up to and including the first that satisfies ``predicate``."""
    deadline = time.monotonic() + timeout_s
    got = []
    while time.monotonic() < deadline:
        ws.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            msg = recv(ws)
        except websocket.WebSocketTimeoutException:
            break
        got.append(msg)
        if predicate(msg):
            return got
    raise AssertionError(f"no matching message within {timeout_s} s; got {got}")


def task_state(index: int, state: str):
    return lambda m: any(t["index"] == index and t["state"] == state
                         for t in m.get("tasks", []))


def test_snapshot_then_deltas_as_tasks_are_claimed_and_done(live_server, nova, store):
    job = enqueue(nova, ["first", "second", "third"])
    ws = connect(live_server, f"/ws/jobs/{job}")
    try:
        snap = recv(ws)
        assert snap["type"] == "snapshot" and snap["job"]["job_id"] == job
        assert [t["state"] for t in snap["tasks"]] == ["pending"] * 3
        assert [e["type"] for e in snap["events"]] == ["enqueued"]
        w = StandInWorker(nova, store, "w-live", name="live-box", backend="rocm", host="h9")
        [lease] = w.claim()
        msgs = recv_until(ws, task_state(0, "leased"))
        leased = next(t for t in msgs[-1]["tasks"] if t["index"] == 0)
        assert leased["owner_text"] == "running on live-box (ROCm on h9)"
        assert msgs[-1]["job"]["leased"] == 1
        assert all(m["type"] == "delta" for m in msgs)
        w.finish(lease)
        msgs = recv_until(ws, task_state(0, "done"))
        done = next(t for t in msgs[-1]["tasks"] if t["index"] == 0)
        assert done["backend_label"] == "ROCm" and done["worker"] == "live-box"
        assert msgs[-1]["job"]["done"] == 1
        assert "completed" in [e["type"] for m in msgs for e in m["events"]]
        with urllib.request.urlopen(live_server + done["image_url"], timeout=5) as resp:
            assert resp.headers["Content-Type"] == "image/png"
            assert resp.read()[:4] == b"\x89PNG"
    finally:
        ws.close()


def test_reconnect_with_after_gets_only_later_events(live_server, nova, store):
    job = enqueue(nova, ["a", "b", "c"])
    ws = connect(live_server, f"/ws/jobs/{job}")
    snap = recv(ws)
    ws.close()
    mark = snap["last_id"]
    w = StandInWorker(nova, store, "w-resume")
    for _ in range(2):
        [lease] = w.claim()
        w.finish(lease)
    ws = connect(live_server, f"/ws/jobs/{job}?after={mark}")
    try:
        first = recv(ws)
        assert first["type"] == "delta"
        ids = [e["id"] for e in first["events"]]
        assert ids and all(_id(i) > _id(mark) for i in ids)
        assert [e["type"] for e in first["events"]] == ["claimed", "completed"] * 2
        assert sorted(t["index"] for t in first["tasks"]) == [0, 1]
        assert {t["state"] for t in first["tasks"]} == {"done"}
        [lease] = w.claim()  # and the socket keeps going from there
        w.finish(lease)
        # a delta reads the job before its tasks: the one that shows task 2 done may show
        # the job still running (the commit landed in between); the next one says done
        msgs = recv_until(ws, lambda m: (m.get("job") or {}).get("state") == "done")
        assert any(task_state(2, "done")(m) for m in msgs)
        later = [e["id"] for m in msgs for e in m["events"]]
        assert not set(later) & set(ids)
        assert msgs[-1]["job"]["eta_text"] == "done"
    finally:
        ws.close()


def _id(event_id: str) -> tuple[int, int]:
    ms, seq = event_id.split("-")
    return int(ms), int(seq)


def test_events_socket_reports_new_jobs(live_server, nova):
    old = enqueue(nova, ["old"])
    ws = connect(live_server, "/ws/events")
    try:
        snap = recv(ws)
        assert snap["type"] == "snapshot" and [j["job_id"] for j in snap["jobs"]] == [old]
        new = enqueue(nova, ["new"], name="fresh")
        msgs = recv_until(ws, lambda m: any(j["job_id"] == new for j in m.get("jobs", [])))
        assert msgs[-1]["events"][0]["type"] == "enqueued"
        assert msgs[-1]["jobs"][0]["title"] == "fresh"
    finally:
        ws.close()


def test_unknown_job_socket_says_so(live_server):
    ws = connect(live_server, "/ws/jobs/nope")
    try:
        msg = recv(ws)
        assert msg["type"] == "error" and "unknown job" in msg["message"]
    finally:
        ws.close()


def test_origin_is_checked_on_connect(live_server, app, nova):
    job = enqueue(nova, ["a"])
    with pytest.raises(websocket.WebSocketBadStatusException) as err:
        connect(live_server, f"/ws/jobs/{job}", origin="http://evil.example")
    assert err.value.status_code == 403
    with pytest.raises(websocket.WebSocketBadStatusException):
        connect(live_server, "/ws/events", origin="http://evil.example")
    for kw in ({"origin": live_server}, {"suppress_origin": True}):
        ws = connect(live_server, f"/ws/jobs/{job}", **kw)
        assert recv(ws)["type"] == "snapshot"
        ws.close()
    app.config["NOVA_WEB_ALLOWED_ORIGINS"] = ["https://gallery.example"]
    ws = connect(live_server, "/ws/events", origin="https://gallery.example")
    assert recv(ws)["type"] == "snapshot"
    ws.close()


def test_job_socket_tells_when_a_worker_for_its_app_joins_and_leaves(live_server, nova):
    from nova_queue import TaskSpec

    job = nova.enqueue("txt2img", [TaskSpec("a castle")])
    ws = connect(live_server, f"/ws/jobs/{job}")
    try:
        snap = recv(ws)
        assert snap["job"]["eligible_workers"] == 0
        assert snap["job"]["workers_text"].startswith("No live worker serves app 'txt2img'")
        nova.register_worker("w-gpu", {"name": "gpu", "backend": "cuda"}, ("txt2img",))
        msgs = recv_until(ws, lambda m: (m.get("job") or {}).get("eligible_workers") == 1)
        assert msgs[-1]["job"]["workers_text"] == "" and msgs[-1]["events"] == []
        nova.deregister_worker("w-gpu")
        msgs = recv_until(ws, lambda m: (m.get("job") or {}).get("eligible_workers") == 0)
        assert "Tasks wait until one joins" in msgs[-1]["job"]["workers_text"]
    finally:
        ws.close()
