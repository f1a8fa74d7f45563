"""Page: tasks that failed for good (``/failed``), with their errors and a requeue action."""

from __future__ import annotations

import logging
import re
from typing import Any

from flask import Blueprint, flash, redirect, render_template, request, url_for

from nova_queue.errors import NovaError
from nova_queue.web.auth import denied, require_write
from nova_queue.web.extensions import nova
from nova_queue.web.live import result_url
from nova_queue.web.present import task_view
from nova_queue.web.security import WriteDenied

log = logging.getLogger(__name__)

bp = Blueprint("failed", __name__)

SHOWN = 200
_TASK_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}:\d{1,12}$")


@bp.get("/failed")
def index() -> Any:
    """Failed tasks, most recent first."""
    tasks = [task_view(t, result_url) for t in nova.client.failed_tasks(SHOWN)]
    return render_template("failed.html", tasks=tasks)


@bp.post("/failed/retry")
def retry() -> Any:
    """Put a failed task back in the queue with fresh attempts (token and CSRF needed)."""
    tid = request.form.get("task", "")
    try:
        require_write()
    except WriteDenied as exc:
        return denied(exc)
    if not _TASK_ID_RE.match(tid):
        flash("Cannot requeue: not a task id.", "error")
        return redirect(url_for("failed.index"), 303)
    try:
        nova.client.retry(tid)
    except NovaError as exc:
        flash(f"Cannot requeue {tid}: {exc}", "error")
        return redirect(url_for("failed.index"), 303)
    log.info("task %s requeued from the web", tid)
    flash(f"Task {tid} is back in the queue.", "ok")
    return redirect(url_for("failed.index"), 303)
