"""Pages: the jobs list with the submission form (``/``), a job's gallery
(``/jobs/<id>``), one task (``/jobs/<id>/tasks/<index>``), and unlocking writes."""

from __future__ import annotations

import logging
from typing import Any

from flask import Blueprint, abort, redirect, render_template, request, url_for

from nova_queue.apps.registry import available_apps
from nova_queue.errors import JobNotFoundError, NovaError, StoreError, TaskNotFoundError
from nova_queue.keys import task_id
from nova_queue.stores import artifact_key, artifact_names
from nova_queue.web.auth import denied, lock_session, require_write
from nova_queue.web.extensions import nova
from nova_queue.web.live import result_url, window_start
from nova_queue.web.livefeed import PAGE_SIZE, EventsFeed, JobFeed
from nova_queue.web.present import task_view
from nova_queue.web.security import WriteDenied, check_csrf, safe_next_path
from nova_queue.web.submit import SubmitForm, submit
from nova_queue.web.text import missing_status

log = logging.getLogger(__name__)

bp = Blueprint("jobs", __name__)


def _jobs_page(form: SubmitForm, error: str = "", status: int = 200,
               headers: dict[str, str] | None = None) -> Any:
    snap = EventsFeed(nova.client).snapshot()
    return render_template("jobs.html", jobs=snap["jobs"], last_id=snap["last_id"],
                           apps=available_apps(), form=form, error=error), status, headers or {}


@bp.get("/")
def index() -> Any:
    """Recent jobs and the submission form."""
    return _jobs_page(SubmitForm())


@bp.post("/")
def create() -> Any:
    """Submit a job (needs the write token and the CSRF token)."""
    form = SubmitForm.from_form(request.form)
    try:
        require_write()
        job_id = submit(nova.client, form, request.files.get("prompts_file"))
    except WriteDenied as exc:
        return _jobs_page(form, exc.message, exc.status, exc.headers)
    except NovaError as exc:
        return _jobs_page(form, str(exc), 400)
    log.info("job %s submitted from the web", job_id)
    return redirect(url_for("jobs.gallery", job_id=job_id), 303)


def _artifacts(job_id: str) -> list[dict[str, str]]:
    found = []
    try:
        for name in artifact_names(job_id):
            key = artifact_key(job_id, name)
            if nova.store.head(key) is not None:
                found.append({"name": name, "url": result_url(key)})
    except StoreError as exc:
        log.warning("cannot list artifacts of job %s: %s", job_id, exc)
    return found


@bp.get("/jobs/<job_id>")
def gallery(job_id: str) -> Any:
    """A job's gallery: a grid that fills live."""
    feed = JobFeed(nova.client, job_id, result_url, start=window_start())
    try:
        snap = feed.snapshot()
    except JobNotFoundError as exc:
        abort(missing_status(exc), str(exc))
    start, stop = snap["window"]
    total = snap["job"]["total"]
    pages = {"prev": max(0, start - PAGE_SIZE) if start > 0 else None,
             "next": stop if stop < total else None}
    return render_template("job.html", snap=snap, job=snap["job"], tasks=snap["tasks"],
                           events=snap["events"], artifacts=_artifacts(job_id), pages=pages)


@bp.get("/jobs/<job_id>/tasks/<int:index>")
def task(job_id: str, index: int) -> Any:
    """One task: the full image and its metadata."""
    try:
        view = task_view(nova.client.task(task_id(job_id, index)), result_url)
    except TaskNotFoundError as exc:
        abort(404, str(exc))
    stored: dict[str, str] = {}
    if view["result_url"]:  # the task's own result only (task_view checks the key)
        try:
            info = nova.store.head(view["result"])
            stored = dict(info.metadata) if info else {}
        except StoreError as exc:
            log.warning("cannot read metadata of %s: %s", view["result"], exc)
    note = view["note"] or stored.get("note", "")
    return render_template("task.html", t=view, stored=sorted(stored.items()), note=note)


@bp.post("/auth")
def unlock() -> Any:
    """Check the write token once; this session may then submit and requeue."""
    try:
        require_write()
    except WriteDenied as exc:
        return denied(exc)
    return redirect(safe_next_path(request.form.get("next")), 303)


@bp.post("/auth/lock")
def lock() -> Any:
    """Forget this session's write access."""
    try:
        check_csrf()
    except WriteDenied as exc:
        return denied(exc)
    lock_session()
    return redirect(safe_next_path(request.form.get("next")), 303)
