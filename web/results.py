"""``/results/<key>``: stored results and job artifacts, served through the app.

Only keys something references can be read: a task's current result
(``jobs/<job>/results/<index>-...``, checked against the task's ``result`` field, which
must be the task's own lease's key: :func:`nova_queue.stores.own_result_ext`) or a
job artifact (``jobs/<job>/manifest.json``, ``contact-sheet.png``, ``<job>.zip``) of a job
that exists. Everything else is 404, so the store cannot be browsed or escaped.

Raster images are served inline; anything else (SVG included: it can carry script) as an
attachment. Objects are write-once, so responses are cacheable forever with an ETag
derived from the key. With a public S3 endpoint configured the app redirects to a
presigned URL instead of proxying the bytes.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from flask import Blueprint, Response, abort, redirect, request

from nova_queue.errors import JobNotFoundError, ObjectNotFoundError, StoreError, TaskNotFoundError
from nova_queue.keys import task_id
from nova_queue.stores import artifact_names, own_result_ext, validate_key
from nova_queue.web.extensions import nova

bp = Blueprint("results", __name__)

INLINE_TYPES = frozenset({"image/png", "image/jpeg", "image/webp", "image/gif", "image/avif"})
#: Types kept for attachments; anything else is sent as application/octet-stream.
ATTACHMENT_TYPES = frozenset({"application/json", "application/zip", "text/plain",
                              "text/csv", "application/x-ndjson"})
CACHE_FOREVER = "public, max-age=31536000, immutable"
PRESIGN_EXPIRES_S = 3600
_RESULT_RE = re.compile(r"^jobs/(?P<job>[^/]+)/results/(?P<index>\d+)-[^/]+$")
_ARTIFACT_RE = re.compile(r"^jobs/(?P<job>[^/]+)/(?P<name>[^/]+)$")


def is_referenced(key: str) -> bool:
    """Whether ``key`` is a task's current result or an artifact of an existing job."""
    client = nova.client
    m = _RESULT_RE.match(key)
    if m:
        try:
            task = client.task(task_id(m.group("job"), int(m.group("index"))))
        except TaskNotFoundError:
            return False
        return task.result == key and own_result_ext(task) is not None
    m = _ARTIFACT_RE.match(key)
    if m and m.group("name") in artifact_names(m.group("job")):
        try:
            client.job(m.group("job"), with_tasks=False)
        except JobNotFoundError:
            return False
        return True
    return False


def etag_for(key: str) -> str:
    """A strong ETag: the key names one immutable object."""
    return hashlib.sha256(key.encode()).hexdigest()[:32]


@bp.get("/results/<path:key>")
def result(key: str) -> Any:
    """One referenced object, inline only if it is a raster image."""
    try:
        validate_key(key)
    except StoreError:
        abort(404)
    if not is_referenced(key):
        abort(404)
    store = nova.store
    if nova.settings.s3_public_endpoint:
        url = store.presign(key, expires_s=PRESIGN_EXPIRES_S)
        if url:
            resp = redirect(url, 302)
            resp.headers["Cache-Control"] = f"private, max-age={PRESIGN_EXPIRES_S // 2}"
            return resp
    etag = etag_for(key)
    if request.if_none_match.contains(etag):
        resp = Response(status=304)
    else:
        try:
            obj = store.get(key)
        except ObjectNotFoundError:
            abort(404)
        ctype = (obj.content_type or "").split(";")[0].strip().lower()
        inline = ctype in INLINE_TYPES
        resp = Response(obj.data, mimetype=ctype if inline or ctype in ATTACHMENT_TYPES
                        else "application/octet-stream")
        name = key.rsplit("/", 1)[-1]  # safe: validate_key allows [A-Za-z0-9._-] only
        resp.headers["Content-Disposition"] = \
            f'{"inline" if inline else "attachment"}; filename="{name}"'
    resp.set_etag(etag)
    resp.headers["Cache-Control"] = CACHE_FOREVER
    resp.headers["X-Content-Type-Options"] = "nosniff"
    resp.headers["Content-Security-Policy"] = "default-src 'none'; sandbox"
    return resp
