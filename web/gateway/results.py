"""Results without store credentials: a worker sends its result with its commit, and the
gateway writes it under exactly that attempt's write-once key and nowhere else, then runs
the commit.

The worker's link sends a commit as one raw body (``Content-Type:``
:data:`~nova_queue.wire.COMMIT_TYPE`, the names of :mod:`nova_queue.wire`): the commit's JSON
(``{"commit", "content_type", "metadata"}``, its length in the header
``COMMIT_LENGTH_HEADER``, at most ``MAX_COMMIT_HEAD_BYTES``), then the result's bytes, with
the lease's task id in ``COMMIT_TASK_HEADER``. The gateway authenticates the request and
reads that task's holder in one round trip (:mod:`~nova_queue.web.gateway.auth`) before it
parses a byte of the body: no multipart parse, no JSON of an unauthenticated body. A
multipart body (the commit's JSON in the field ``commit``, the result in the file ``data``
with ``content_type`` and ``metadata``: what the first release's link sends) is accepted
too, its holder read after authentication. A batch of commits (:func:`read_batch`) is one
raw body too: its JSON lists each commit with its result's size, and the results follow;
it is read after authentication, its holders in one round trip. JSON nested deeper than
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
from nova_queue.keys import RESULT_EXT_RE, result_key
from nova_queue.limits import MAX_CLAIM_K
from nova_queue.models import Lease
from nova_queue.results import candidate_bytes
from nova_queue.stores.base import normalize_metadata
from nova_queue.web.gateway.auth import HOLDER_FIELDS, Caller

log = logging.getLogger(__name__)


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
        return cls(raw=request.mimetype == wire.COMMIT_TYPE)

    @staticmethod
    def task_hint() -> str | None:
        """The task id the request's header names, to read its holder with the token;
        nothing is trusted from it (the commit's lease must name the same task)."""
        tid = request.headers.get(wire.COMMIT_TASK_HEADER, "")
        return tid if 0 < len(tid) <= 256 else None

    def commit(self) -> dict[str, Any]:
        """The commit's JSON object (its head parsed once), or 400."""
        if self.head is None:
            self.head = self._read_raw_head() if self.raw else self._read_form()
        body = self.head.get("commit")
        if not isinstance(body, dict):
            raise errors.InputError("complete: send the result with the commit: a raw body "
                                    f"({wire.COMMIT_TYPE}: {wire.COMMIT_LENGTH_HEADER} bytes "
                                    "of JSON with a 'commit' object, then the result) or "
                                    "multipart/form-data ('commit', 'data')")
        return body

    @staticmethod
    def _read_raw_head() -> dict[str, Any]:
        return _raw_head("complete", wire.MAX_COMMIT_HEAD_BYTES)

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


def _raw_head(call: str, limit: int, what: str = "the commit's JSON") -> dict[str, Any]:
    """A raw body's JSON: its length in the header (1 to ``limit`` bytes), parsed; or 400."""
    try:
        size = int(request.headers.get(wire.COMMIT_LENGTH_HEADER, ""))
    except ValueError:
        size = 0
    if not 0 < size <= limit:
        raise errors.InputError(f"{call}: {wire.COMMIT_LENGTH_HEADER} must be from 1 to "
                                f"{limit}")
    return parse_json(request.stream.read(size), f"{call}: {what}")


@dataclasses.dataclass(frozen=True)
class BatchItem:
    """One commit of a batch and its result, as sent (nothing checked yet)."""

    commit: dict[str, Any]
    content_type: object
    metadata: object
    data: bytes


def read_batch(limit: int) -> tuple[list[BatchItem], object]:
    """A batch's commits with their results, and its ``next`` claim as sent (read after
    authentication): 400 for a body that is not a batch (1 to 64 commits, each with its
    result's size, the results exactly as long), 413 when its results are over ``limit``."""
    if request.mimetype != wire.COMMIT_TYPE:
        raise errors.InputError(f"complete_batch: send a raw body ({wire.COMMIT_TYPE})")
    head = _raw_head("complete_batch", wire.MAX_BATCH_HEAD_BYTES, "the batch's JSON")
    entries = head.get("commits")
    if not (isinstance(entries, list) and 1 <= len(entries) <= MAX_CLAIM_K
            and all(isinstance(e, dict) and isinstance(e.get("commit"), dict)
                    and type(e.get("bytes")) is int and e["bytes"] >= 0 for e in entries)):
        raise errors.InputError(f"complete_batch: 'commits' must list 1 to {MAX_CLAIM_K} "
                                "commits, each with its result's size ('bytes')")
    total = sum(e["bytes"] for e in entries)
    if total > limit:
        raise errors.ResultTooLargeError(
            f"the results are larger than the gateway accepts ({limit} bytes)")
    data = request.stream.read(total + 1)
    if len(data) != total:
        raise errors.InputError("complete_batch: the results' sizes do not match the body")
    items, at = [], 0
    for e in entries:
        items.append(BatchItem(e["commit"], e.get("content_type"), e.get("metadata"),
                               data[at:at + e["bytes"]]))
        at += e["bytes"]
    return items, head.get("next")


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
    return _held(vals, caller, lease)


def holders(state, caller: Caller, leases: list[Lease]) -> list[bool]:
    """:func:`holds` for each of ``leases``, read in one round trip."""
    pipe = state.client.redis.pipeline(transaction=False)
    for lease in leases:
        pipe.hmget(state.client.keys.task(lease.task_id), HOLDER_FIELDS)
    return [_held(dict(zip(HOLDER_FIELDS, row)), caller, lease)
            for row, lease in zip(pipe.execute(), leases, strict=True)]


def _held(vals: dict[str, str | None], caller: Caller, lease: Lease) -> bool:
    gen, aid, wid = str(lease.lease_gen), lease.attempt_id, caller.worker_id
    primary = (vals["worker"], vals["lease_gen"], vals["attempt_id"]) == (wid, gen, aid)
    backup = (vals["b_worker"], vals["b_lease_gen"], vals["b_attempt_id"]) == (wid, gen, aid)
    return vals["state"] == "leased" and (primary or backup)


def store_upload(state, caller: Caller, lease: Lease, key: str, upload: Upload) -> None:
    """Write the request's result under ``lease``'s key (checked by :func:`lease_key`)."""
    head = upload.head or {}
    store_result(state, caller, lease, key, upload.data(state.settings.gateway_max_result_bytes),
                 head.get("content_type"), head.get("metadata"))


def store_result(state, caller: Caller, lease: Lease, key: str, data: bytes,
                 content_type: object, worker_meta: object) -> None:
    """Write a result under ``lease``'s key (checked by :func:`lease_key`) with the metadata
    the gateway vouches for. A retried upload of the same attempt finds its own object and
    succeeds."""
    content_type = str(content_type or "application/octet-stream")[:128]
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


def candidate(state, tid: str, slot: str) -> bytes | None:
    """The result ``slot`` (``cand`` or ``cand2``) of task ``tid`` awaiting verification
    (:func:`nova_queue.results.candidate_bytes`, its object at most the gateway's result
    limit); None when the task has none."""
    client = state.client
    return candidate_bytes(client.redis, client.keys, state.store, tid, slot,
                           client.redis.hget(client.keys.task(tid), slot),
                           state.settings.gateway_max_result_bytes)
