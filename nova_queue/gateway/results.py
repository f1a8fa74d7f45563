"""Results without store credentials: a worker sends its result with its commit, and the
gateway writes it under exactly that attempt's write-once key and nowhere else, then runs
the commit.

The worker's link sends a commit as one raw body (``Content-Type:`` :data:`RAW_TYPE`): the
commit's JSON (``{"commit", "content_type", "metadata"}``, its length in the header
:data:`HEAD_HEADER`, at most :data:`MAX_HEAD_BYTES`), then the result's bytes, with the
lease's task id in :data:`TASK_HEADER`. The gateway authenticates the request and reads
that task's holder in one round trip (:mod:`~nova_queue.gateway.auth`) before it parses a
byte of the body: no multipart parse, no JSON of an unauthenticated body. A multipart body
(the commit's JSON in the field ``commit``, the result in the file ``data`` with
``content_type`` and ``metadata``: what the first release's link sends) is accepted too,
its holder read after authentication. JSON nested deeper than
:data:`~nova_queue.wire.MAX_JSON_DEPTH` is a 400 and one log line.

The commit names its lease; the gateway checks everything the commit could be refused for
that does not need the scripts (its lease, its key: that lease's key,
:func:`~nova_queue.keys.result_key`, its numbers, metadata and next claim, the result's
size) and only then, if the calling worker holds that attempt now (primary or backup),
writes the result before the commit script runs; if not, the script's fence refuses the
commit (and counts it), and nothing is written. It reads at most
``NOVA_GATEWAY_MAX_RESULT_BYTES`` (413 above; the body is buffered up to that limit, not
streamed, since the store's ``put`` takes bytes) and writes it with the metadata it vouches
for (job, task, lease generation, attempt id and worker id are the gateway's, not the
worker's). The fencing of the data plane holds as in direct mode: keys are write-once per
attempt, and the object of a commit the scripts refuse (the fence, an unknown task, bad
input: :data:`~nova_queue.errors.COMMIT_REFUSALS`) is deleted, here by the gateway and only
if this worker wrote it (a forged commit cannot delete another worker's result); a commit
whose outcome is unknown (Redis unreachable) keeps its object.

Why through the gateway rather than a presigned PUT URL handed out at claim: it works the
same on every store (the file store has no URLs), the lease is checked before a byte is
written (a URL, once handed out, stays valid after the lease is lost), the size limit is
the gateway's own, and result and commit make one request. The cost is the result's bytes
passing through the gateway (at most the size limit per request in flight).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from flask import request

from nova_queue import errors, wire
from nova_queue.gateway.auth import HOLDER_FIELDS, Caller
from nova_queue.keys import RESULT_EXT_RE, result_key
from nova_queue.models import Lease
from nova_queue.stores.base import normalize_metadata

log = logging.getLogger(__name__)

#: The content type of a raw commit: the commit's JSON, then the result's bytes.
RAW_TYPE = wire.COMMIT_TYPE
#: The header that gives the length of a raw commit's JSON, in bytes.
HEAD_HEADER = wire.COMMIT_LENGTH_HEADER
#: The header that names the commit's task (read with the token; a hint, never trusted).
TASK_HEADER = wire.COMMIT_TASK_HEADER
#: The longest commit JSON (the commit, content type and metadata) a commit may carry.
MAX_HEAD_BYTES = 64 * 1024


def parse_json(raw: bytes | str, what: str) -> dict[str, Any]:
    """A request's JSON object (:func:`nova_queue.wire.json_object`); a refused one is a
    400 and one log line naming the route and why (never the body)."""
    try:
        return wire.json_object(raw, what)
    except errors.InputError as exc:
        log.warning("refused %s %s: %s", request.method, request.path, exc)
        raise


@dataclasses.dataclass
class Upload:
    """A commit request: nothing of its body is parsed until :meth:`commit` is asked for
    (after authentication); its result is read when :meth:`data` is first asked for."""

    raw: bool
    head: dict[str, Any] | None = None
    _data: bytes | None = None

    @classmethod
    def from_request(cls) -> Upload:
        """The request's kind (raw or multipart); its body stays unread."""
        return cls(raw=request.mimetype == RAW_TYPE)

    @staticmethod
    def task_hint() -> str | None:
        """The task id the request's header names, to read its holder with the token;
        nothing is trusted from it (the commit's lease must name the same task)."""
        tid = request.headers.get(TASK_HEADER, "")
        return tid if 0 < len(tid) <= 256 else None

    def commit(self) -> dict[str, Any]:
        """The commit's JSON object (its head parsed once), or 400."""
        if self.head is None:
            self.head = self._read_raw_head() if self.raw else self._read_form()
        body = self.head.get("commit")
        if not isinstance(body, dict):
            raise errors.InputError("complete: send the result with the commit: a raw body "
                                    f"({RAW_TYPE}: {HEAD_HEADER} bytes of JSON with a "
                                    "'commit' object, then the result) or multipart/form-data "
                                    "('commit', 'data')")
        return body

    @staticmethod
    def _read_raw_head() -> dict[str, Any]:
        try:
            size = int(request.headers.get(HEAD_HEADER, ""))
        except ValueError:
            size = 0
        if not 0 < size <= MAX_HEAD_BYTES:
            raise errors.InputError(f"complete: {HEAD_HEADER} must be from 1 to "
                                    f"{MAX_HEAD_BYTES}")
        return parse_json(request.stream.read(size), "complete: the commit's JSON")

    @staticmethod
    def _read_form() -> dict[str, Any]:
        if request.mimetype != "multipart/form-data":
            return {}
        return {"commit": parse_json(request.form.get("commit", ""), "complete: 'commit'"),
                "content_type": request.form.get("content_type"),
                "metadata": parse_json(request.form.get("metadata") or "{}",
                                       "complete: 'metadata'")}

    def data(self, limit: int) -> bytes:
        """The result's bytes (at most ``limit``: 413 above), read once."""
        if self._data is None:
            if self.raw:
                data = request.stream.read(limit + 1)
            else:
                upload = request.files.get("data")
                if upload is None:
                    raise errors.InputError("upload: the result goes in the file field 'data'")
                data = upload.read(limit + 1)
            if len(data) > limit:
                raise errors.ResultTooLargeError(
                    f"the result is larger than the gateway accepts ({limit} bytes)")
            self._data = data
        return self._data


def lease_key(lease: Lease, key: object) -> str:
    """``key`` if it is ``lease``'s own result key (any extension), else 403."""
    if not isinstance(key, str) or "." not in key:
        raise errors.InputError("key: expected a result key")
    ext = key.rsplit(".", 1)[1]
    if not RESULT_EXT_RE.match(ext) or key != result_key(
            lease.job_id, lease.index, lease.lease_gen, lease.attempt_id, ext):
        raise errors.AccessDeniedError(f"{key!r} is not the result key of lease "
                                       f"{lease.task_id} g{lease.lease_gen}")
    return key


def holds(state, caller: Caller, lease: Lease) -> bool:
    """Whether the caller holds this attempt of the task now (primary or backup): from the
    fields read with its token when they are this task's, else read now."""
    vals = caller.task if caller.task_id == lease.task_id else dict(zip(
        HOLDER_FIELDS, state.client.redis.hmget(state.client.keys.task(lease.task_id),
                                                HOLDER_FIELDS)))
    gen, aid, wid = str(lease.lease_gen), lease.attempt_id, caller.worker_id
    primary = (vals["worker"], vals["lease_gen"], vals["attempt_id"]) == (wid, gen, aid)
    backup = (vals["b_worker"], vals["b_lease_gen"], vals["b_attempt_id"]) == (wid, gen, aid)
    return vals["state"] == "leased" and (primary or backup)


def store_upload(state, caller: Caller, lease: Lease, key: str, upload: Upload) -> None:
    """Write the request's result under ``lease``'s key (checked by :func:`lease_key`). A
    retried upload of the same attempt finds its own object and succeeds."""
    worker_meta = upload.head.get("metadata") if upload.head else None
    data = upload.data(state.settings.gateway_max_result_bytes)
    content_type = str((upload.head or {}).get("content_type")
                       or "application/octet-stream")[:128]
    meta = _metadata(worker_meta, lease, caller)
    try:
        state.store.put(key, data, content_type, meta)
    except errors.ObjectExistsError:
        info = state.store.head(key)
        if not (info and info.metadata.get("attempt-id") == lease.attempt_id
                and info.metadata.get("worker-id") == caller.worker_id):
            raise


def _metadata(worker_meta: object, lease: Lease, caller: Caller) -> dict[str, str]:
    """The object's metadata: the worker's (app, backend, names, prompt) with the fields
    that say whose result it is set by the gateway."""
    meta = ({str(k): str(v) for k, v in worker_meta.items()}
            if isinstance(worker_meta, dict) else {})
    meta.update({"job": lease.job_id, "task": lease.task_id, "lease-gen": str(lease.lease_gen),
                 "attempt-id": lease.attempt_id, "worker-id": caller.worker_id,
                 "token": caller.token.name})
    try:
        return normalize_metadata(meta)
    except errors.StoreError as exc:
        raise errors.InputError(f"upload metadata: {exc}") from None


def delete_orphan(state, caller: Caller, key: str) -> None:
    """Delete the object of a rejected commit, if this worker wrote it."""
    try:
        info = state.store.head(key)
        if info is not None and info.metadata.get("worker-id") == caller.worker_id:
            state.store.delete(key)
            log.info("deleted orphan %s of a rejected commit", key)
    except errors.StoreError as exc:
        log.warning("could not delete orphan %s: %s", key, exc)
