"""Where a task's result lives: in Redis when it is small, else in the result store.

A worker holds a result of 1 to ``Settings.inline_result_bytes`` bytes (default 1024, at most
:data:`~nova_queue.limits.MAX_INLINE_BYTES`) in Redis: the commit itself writes it, under the
task's hash ``inline:<task id>`` (field ``data``), fenced like the rest of the commit (a stale commit writes
nothing), as BullMQ keeps a job's return value. That saves the store's round trips and a
file store's fsyncs, which cost a small task more than its run. A larger result goes to the
store first, under its write-once result key, then the commit points the task at it.

Either way the task's ``result`` field names the result key
(``jobs/<job>/results/<index>-g<gen>-<attempt>.<ext>``), so readers ask by key and
:class:`Results` answers from Redis or the store: it is what the gallery, ``nova-queue
results`` and the post-processing jobs read through (``get``, ``head``; ``presign`` only for
objects in the store). The inline key goes with its task (retention, ``purge``).
"""

from __future__ import annotations

import json
import mimetypes
import re
from typing import TYPE_CHECKING, Any

from redis.client import NEVER_DECODE

from nova_queue import errors
from nova_queue.limits import MAX_INLINE_BYTES
from nova_queue.stores.base import ObjectInfo, StoredObject

if TYPE_CHECKING:
    import redis

    from nova_queue.keys import Keyspace
    from nova_queue.stores.base import ResultStore

#: A result key's job id and task index (nova_queue/keys.py, result_key).
_RESULT_KEY = re.compile(r"^jobs/([A-Za-z0-9_-]{1,64})/results/(\d{5,12})-g\d{1,20}-"
                         r"[A-Za-z0-9_-]{1,64}\.[A-Za-z0-9]{1,16}$")


def candidate_bytes(client: redis.Redis, keys: Keyspace, store: ResultStore, tid: str,
                    slot: str, key: str | None, max_bytes: int = 0) -> bytes | None:
    """The result ``slot`` (``cand`` or ``cand2``) of task ``tid`` awaiting verification:
    its inline copy (``inline:<task>`` field ``slot``), else the store's object ``key``;
    None when it has neither. With ``max_bytes``, StoreError for a larger object (a
    gateway's verifier reads no more than a worker may send)."""
    data = client.execute_command("HGET", keys.inline(tid), slot, **{NEVER_DECODE: []})
    if data is not None:
        return bytes(data)
    if not key:
        return None
    if max_bytes:
        info = store.head(key)
        if info is None:
            return None
        if info.size > max_bytes:
            raise errors.StoreError(f"{key} is {info.size} bytes; the gateway serves "
                                    f"{max_bytes}")
    try:
        return store.get(key).data
    except errors.ObjectNotFoundError:
        return None


def check_inline(data: bytes) -> None:
    """Raise InputError unless ``data`` is bytes a commit may hold inline (empty: none)."""
    if not isinstance(data, (bytes, bytearray)) or len(data) > MAX_INLINE_BYTES:
        raise errors.InputError(f"an inline result must be at most {MAX_INLINE_BYTES} bytes")


def task_of(key: str) -> str | None:
    """The task id (``<job>:<index>``) whose result ``key`` is, or None for another key."""
    m = _RESULT_KEY.match(key)
    return f"{m.group(1)}:{int(m.group(2))}" if m else None


class Results:
    """Results by key: a task's inline result from Redis, else the object in ``store``.

    ``client`` is a ``redis.Redis`` of the namespace (its replies may be decoded: the inline
    bytes are read undecoded), ``keys`` the namespace's Keyspace."""

    def __init__(self, client: redis.Redis, keys: Keyspace, store: ResultStore):
        self.redis, self.keys, self.store = client, keys, store

    @property
    def url(self) -> str:
        return self.store.url

    def _inline(self, key: str) -> tuple[bytes, dict[str, Any]] | None:
        """(bytes, task fields) when ``key`` is the result its task holds inline."""
        tid = task_of(key)
        if tid is None:
            return None
        pipe = self.redis.pipeline(transaction=False)
        pipe.hmget(self.keys.task(tid), ["result", "meta", "input", "lease_gen", "attempt_id",
                                         "worker", "worker_name", "backend"])
        pipe.execute_command("HGET", self.keys.inline(tid), "data", **{NEVER_DECODE: []})
        fields, data = pipe.execute()
        if data is None or _text(fields[0]) != key:
            return None  # not held inline, or an older attempt's key: the store's
        names = ("result", "meta", "input", "lease_gen", "attempt_id", "worker", "worker_name",
                 "backend")
        return bytes(data), {n: _text(v) for n, v in zip(names, fields)}

    def get(self, key: str) -> StoredObject:
        """The result's bytes (ObjectNotFoundError when neither holds it)."""
        held = self._inline(key)
        if held is None:
            return self.store.get(key)
        data, fields = held
        return StoredObject(key=key, data=data, content_type=_content_type(key, fields),
                            metadata=_metadata(key, fields))

    def head(self, key: str) -> ObjectInfo | None:
        """The result's attributes, or None when neither holds it."""
        held = self._inline(key)
        if held is None:
            return self.store.head(key)
        data, fields = held
        return ObjectInfo(key=key, size=len(data), content_type=_content_type(key, fields),
                          metadata=_metadata(key, fields))

    def presign(self, key: str, expires_s: int = 3600) -> str | None:
        """A store URL for an object in the store; None for an inline result (the caller
        serves the bytes itself)."""
        if self._inline(key) is not None:
            return None
        return self.store.presign(key, expires_s=expires_s)

    def __getattr__(self, name: str) -> Any:
        # everything else (put, delete, list, artifacts...) is the store's own
        return getattr(self.store, name)


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


def _content_type(key: str, fields: dict[str, Any]) -> str:
    """The content type the worker recorded in the task's provenance, else by extension."""
    try:
        meta = json.loads(fields.get("meta") or "{}")
    except ValueError:
        meta = {}
    ctype = meta.get("content_type") if isinstance(meta, dict) else None
    if isinstance(ctype, str) and ctype:
        return ctype
    return mimetypes.guess_type(key)[0] or "application/octet-stream"


def _metadata(key: str, fields: dict[str, Any]) -> dict[str, str]:
    """What a stored object's metadata says (the worker's _object_meta), from the task."""
    tid = task_of(key) or ""
    return {"held": "inline (Redis)", "job": tid.split(":")[0], "task": tid,
            "lease-gen": fields.get("lease_gen", ""), "attempt-id": fields.get("attempt_id", ""),
            "worker": fields.get("worker_name", ""), "worker-id": fields.get("worker", ""),
            "backend": fields.get("backend", ""), "prompt": fields.get("input", "")[:600]}
