"""Page: the event timeline (``/events``, ``/events?job=<id>``) — claims, completions,
requeues, stale rejections, workers joining and being lost."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, render_template, request

from nova_queue.web.extensions import nova
from nova_queue.web.livefeed import EventsFeed

bp = Blueprint("events", __name__)


@bp.get("/events")
def index() -> Any:
    """The newest events first; new ones are prepended live by ``static/events.js``."""
    job_id = request.args.get("job") or ""
    snap = EventsFeed(nova.client, job_id).snapshot()
    return render_template("events.html", events=list(reversed(snap["events"])),
                           last_id=snap["last_id"], job_id=job_id)
