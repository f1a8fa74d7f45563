"""The JSON API: the same shapes the CLI prints with ``--json``.

- ``/api/jobs?limit=N``: recent jobs, ``JobStatus.to_json(with_tasks=False)`` each.
- ``/api/jobs/<id>``: ``JobStatus.to_json()`` (what ``status --json`` prints) plus
  ``eligible_workers``: how many live workers can run it (0: its tasks wait), and
  ``cannot_run``: the live workers that could not prepare it, each with its reason.
- ``/api/jobs/<id>/timeline``: every attempt at the job's tasks, one lane per worker
  (``nova_queue.timeline.job_timeline`` with each bar's place, class and label).
- ``/api/workers``: ``WorkerInfo.to_json()`` each.
- ``/api/events?after=ID&job=JOB&count=N``: ``Event.to_json()`` each, oldest first: those
  of ``count`` stream entries after ``ID`` (an entry of several tasks' claims or commits
  gives one event each, with the entry's ``id`` and its ``part``); without ``after`` the
  newest ``count`` events.
- ``/api/failed``: failed tasks, ``TaskInfo.to_json()`` each.
Errors are ``{"error": message}`` with the HTTP status.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, abort, jsonify, request

from nova_queue.errors import JobNotFoundError
from nova_queue.timeline import job_timeline
from nova_queue.web.extensions import nova
from nova_queue.web.lanes import timeline_view
from nova_queue.web.livefeed import parse_event_id
from nova_queue.web.text import missing_status

bp = Blueprint("api", __name__, url_prefix="/api")

MAX_LIMIT = 1000


def _int_arg(name: str, default: int) -> int:
    raw = request.args.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        abort(400, f"{name} must be an integer")
    if not 1 <= value <= MAX_LIMIT:
        abort(400, f"{name} must be between 1 and {MAX_LIMIT}")
    return value


@bp.get("/jobs")
def jobs() -> Any:
    """Recent jobs, newest first."""
    limit = _int_arg("limit", 50)
    return jsonify([j.to_json(with_tasks=False) for j in nova.client.jobs(limit)
                    if j.state != "staging"])


@bp.get("/jobs/<job_id>")
def job(job_id: str) -> Any:
    """One job with its tasks and how many live workers can run it."""
    try:
        status = nova.client.job(job_id)
    except JobNotFoundError as exc:
        abort(missing_status(exc), str(exc))
    runners = nova.client.who_can_run(status.app, status.requires, status.model)
    return jsonify({**status.to_json(), "eligible_workers": len(runners.eligible),
                    "cannot_run": [b.to_json() for b in runners.blocked]})


@bp.get("/jobs/<job_id>/timeline")
def timeline(job_id: str) -> Any:
    """Who ran which attempt of the job's tasks, when, and how each ended."""
    try:
        tl = job_timeline(nova.client, job_id)
    except JobNotFoundError as exc:
        abort(missing_status(exc), str(exc))
    return jsonify(timeline_view(tl))


@bp.get("/workers")
def workers() -> Any:
    """Registered workers, live ones first."""
    return jsonify([w.to_json() for w in nova.client.workers()])


@bp.get("/events")
def events() -> Any:
    """Events after an id, or the newest ones; optionally of one job."""
    count = _int_arg("count", 200)
    job_id = request.args.get("job") or None
    after = request.args.get("after")
    if after is None:
        evs = nova.client.recent_events(count, job_id=job_id)
    else:
        if parse_event_id(after) is None:
            abort(400, "after must be a stream id like 1700000000000-0")
        evs = nova.client.events(after, count=count)
        if job_id:
            evs = [e for e in evs if e.fields.get("job") == job_id]
    return jsonify([e.to_json() for e in evs])


@bp.get("/failed")
def failed() -> Any:
    """Tasks that failed for good, most recent first."""
    return jsonify([t.to_json() for t in nova.client.failed_tasks(_int_arg("limit", 100))])
