"""Live updates: WebSockets (flask-sock) and their polling fallback.

- ``/ws/jobs/<job_id>?after=ID&start=N``: one job's gallery (tasks ``N`` .. ``N+PAGE_SIZE``).
- ``/ws/events?after=ID&job=JOB``: the timeline and the recent jobs list.
- ``/api/live/jobs/<job_id>`` and ``/api/live/events`` answer the same messages over plain
  HTTP (one message per request) for clients whose WebSocket cannot connect.
- ``/api/live/workers``: the workers page's view (host groups and app warnings).

Each socket sends the snapshot (or the catch-up delta) first, then blocks on the Redis
event stream (``XREAD BLOCK``) and sends a delta for each batch that concerns it, all
through the sockets' own Redis client (``NovaState.live_client``). The handshake is
refused with 403 unless the Origin is allowed (see ``security.py``), and then as
``sockets.py`` says (the session a token asks for, the caps).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import redis
from flask import Blueprint, abort, current_app, jsonify, request, url_for

from nova_queue.errors import JobNotFoundError
from nova_queue.web import sockets
from nova_queue.web.extensions import nova, sock, state_of
from nova_queue.web.livefeed import EventsFeed, JobFeed
from nova_queue.web.present import app_warnings, host_groups
from nova_queue.web.security import check_origin
from nova_queue.web.text import missing_status

log = logging.getLogger(__name__)

bp = Blueprint("live", __name__)

#: How long one XREAD blocks; also how soon a socket notices its peer went away.
BLOCK_MS = 1000
#: Events read per XREAD.
BATCH = 500


def result_url(key: str) -> str:
    """The app URL of a stored result."""
    return url_for("results.result", key=key)


def window_start() -> int:
    """The ``start`` query parameter: the first task index of a gallery page."""
    try:
        return max(0, int(request.args.get("start", "0")))
    except ValueError:
        abort(400, "start must be a non-negative integer")


@bp.before_request
def _admit_sockets() -> Any:
    """A WebSocket handshake: its Origin first, then its session and the caps."""
    if not request.path.startswith("/ws/"):
        return None
    if not check_origin():
        log.warning("refused WebSocket from origin %r", request.headers.get("Origin"))
        abort(403, "WebSocket origin not allowed")
    return sockets.admit()


def _live_client():
    """The sockets' own client: its pool is not the pages' (``sockets.py``)."""
    return state_of(current_app).live_client


def _pump(ws: Any, first: dict[str, Any], feed: JobFeed | EventsFeed) -> None:
    client = _live_client()
    ws.send(json.dumps(first))
    last = first["last_id"]
    while ws.connected:
        try:
            events = client.events(last, count=BATCH, block_ms=BLOCK_MS)
        except redis.RedisError as exc:
            log.warning("live feed stopped: Redis error: %s", exc)
            ws.close(reason=1011, message="Redis unavailable; reconnect with ?after=")
            return
        if not events:
            continue
        last = events[-1].id
        msg = feed.delta(events, last)
        if msg["events"] or msg.get("tasks") or msg.get("jobs") or msg.get("job"):
            ws.send(json.dumps(msg))


def _serve(ws: Any, feed: JobFeed | EventsFeed) -> None:
    """Send the first message (snapshot or catch-up), then pump deltas."""
    try:
        first = feed.resume(request.args.get("after"))
    except JobNotFoundError as exc:
        # A final answer: the client shows it and does not reconnect.
        ws.send(json.dumps({"type": "error", "message": str(exc)}))
        return
    except redis.RedisError as exc:
        log.warning("live feed not started: Redis error: %s", exc)
        ws.close(reason=1011, message="Redis unavailable; reconnect with ?after=")
        return
    _pump(ws, first, feed)


@sock.route("/ws/jobs/<job_id>", bp=bp)
def job_socket(ws: Any, job_id: str) -> None:
    """One job's snapshot, then deltas."""
    _serve(ws, JobFeed(_live_client(), job_id, result_url, start=window_start()))


@sock.route("/ws/events", bp=bp)
def events_socket(ws: Any) -> None:
    """The timeline (and recent jobs), then deltas."""
    _serve(ws, EventsFeed(_live_client(), request.args.get("job")))


@bp.get("/api/live/jobs/<job_id>")
def job_poll(job_id: str) -> Any:
    """Polling fallback of ``/ws/jobs/<job_id>``: one message."""
    feed = JobFeed(nova.client, job_id, result_url, start=window_start())
    try:
        return jsonify(feed.resume(request.args.get("after")))
    except JobNotFoundError as exc:
        abort(missing_status(exc), str(exc))


@bp.get("/api/live/events")
def events_poll() -> Any:
    """Polling fallback of ``/ws/events``: one message."""
    feed = EventsFeed(nova.client, request.args.get("job"))
    return jsonify(feed.resume(request.args.get("after")))


def workers_view() -> dict[str, Any]:
    """Host groups of workers and warnings for apps no live worker serves."""
    client = nova.client
    workers = client.workers()
    apps = client.apps()
    pending = {app: client.pending_count(app) for app in apps}
    now_ms = client.server_time_ms()
    return {"now_ms": now_ms, "groups": host_groups(workers, now_ms),
            "warnings": app_warnings(apps, pending, workers)}


@bp.get("/api/live/workers")
def workers_poll() -> Any:
    """The workers page's view as JSON."""
    return jsonify(workers_view())
