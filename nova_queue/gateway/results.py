"""Results without store credentials: a worker sends its result with its commit (a multipart
``complete``), and the gateway writes it under exactly that attempt's write-once key and
nowhere else, then runs the commit.

The commit names its lease; the gateway checks that the key is that lease's key
(:func:`~nova_queue.keys.result_key`, the format ``complete`` enforces) and, if the calling
worker holds that attempt now (primary or backup), writes the result before the commit
script runs; if not, the script's fence refuses the commit (and counts it), and nothing is
written. It reads at most
``NOVA_GATEWAY_MAX_RESULT_BYTES`` (413 above; the body is buffered up to that limit, not
streamed, since the store's ``put`` takes bytes) and writes it with the metadata it vouches
for (job, task, lease generation, attempt id and worker id are the gateway's, not the
worker's). The fencing of the data plane holds as in direct mode: keys are write-once per
attempt, and the object of a commit the scripts reject is deleted (here by the gateway, and
only if this worker wrote it: a forged commit cannot delete another worker's result).

Why through the gateway rather than a presigned PUT URL handed out at claim: it works the
same on every store (the file store has no URLs), the lease is checked before a byte is
written (a URL, once handed out, stays valid after the lease is lost), the size limit is
the gateway's own, and result and commit make one request. The cost is the result's bytes
passing through the gateway (at most the size limit per request in flight).
"""

from __future__ import annotations

import json
import logging

from flask import request

from nova_queue import errors
from nova_queue.gateway.auth import Caller
from nova_queue.keys import RESULT_EXT_RE, result_key
from nova_queue.models import Lease
from nova_queue.stores.base import normalize_metadata

log = logging.getLogger(__name__)

_HOLDER_FIELDS = ("state", "worker", "lease_gen", "attempt_id", "b_worker", "b_lease_gen",
                  "b_attempt_id")


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
    """Whether the caller holds this attempt of the task now (primary or backup)."""
    vals = dict(zip(_HOLDER_FIELDS, state.client.redis.hmget(
        state.client.keys.task(lease.task_id), _HOLDER_FIELDS)))
    gen, aid, wid = str(lease.lease_gen), lease.attempt_id, caller.worker_id
    primary = (vals["worker"], vals["lease_gen"], vals["attempt_id"]) == (wid, gen, aid)
    backup = (vals["b_worker"], vals["b_lease_gen"], vals["b_attempt_id"]) == (wid, gen, aid)
    return vals["state"] == "leased" and (primary or backup)


def store_upload(state, caller: Caller, lease: Lease, key: str) -> None:
    """Write the request's result (form ``content_type``, ``metadata``, file ``data``) under
    ``lease``'s key (checked by :func:`lease_key`). A retried upload of the same attempt
    finds its own object and succeeds."""
    try:
        worker_meta = json.loads(request.form.get("metadata") or "{}")
    except ValueError:
        raise errors.InputError("upload: metadata must be JSON") from None
    data = _read_data(state.settings.gateway_max_result_bytes)
    content_type = str(request.form.get("content_type") or "application/octet-stream")[:128]
    meta = _metadata(worker_meta, lease, caller)
    try:
        state.store.put(key, data, content_type, meta)
    except errors.ObjectExistsError:
        info = state.store.head(key)
        if not (info and info.metadata.get("attempt-id") == lease.attempt_id
                and info.metadata.get("worker-id") == caller.worker_id):
            raise


def _read_data(limit: int) -> bytes:
    upload = request.files.get("data")
    if upload is None:
        raise errors.InputError("upload: the result goes in the file field 'data'")
    data = upload.read(limit + 1)
    if len(data) > limit:
        raise errors.ResultTooLargeError(
            f"the result is larger than the gateway accepts ({limit} bytes)")
    return data


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
