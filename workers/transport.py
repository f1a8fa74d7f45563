"""The worker's one interface to its pool: :class:`WorkerTransport`.

A worker reaches its pool in one of two ways: straight to Redis and the result store
(:class:`DirectTransport`, around :class:`~nova_queue.client.NovaClient`), or through a
gateway with only a token (:class:`~nova_queue.workers.link.GatewayLink`, JSON over HTTPS).
Both implement this protocol, and the runtime (``runtime.py``, the claims, the executor, its
commits, the heartbeat, model loads, abandonment) holds one and never asks which: the
choice is made once, here, by :func:`open_transport`.

The calls keep the direct client's signatures and meanings (a lease that is no longer
current is a StaleResultError, an unreachable pool a :class:`redis.ConnectionError`, so the
runtime's retry paths are the same in both modes). Where the two differ, the difference
lives inside the transport: a gateway's claim waits for work itself (a long poll), so its
:meth:`~WorkerTransport.wait_for_work` only sleeps what is left of the hint; its
:meth:`~WorkerTransport.upload` keeps the result for the commit that sends it, and the
gateway writes it under the attempt's key.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, TypedDict, runtime_checkable

from nova_queue import protocol, wake
from nova_queue.client import BatchCommit, BatchResult, NovaClient
from nova_queue.errors import ObjectExistsError, ObjectNotFoundError
from nova_queue.models import ClaimResult, CompleteResult, FailResult, Lease, RenewResult
from nova_queue.results import candidate_bytes
from nova_queue.settings import Settings
from nova_queue.stores import ResultStore, open_store
from nova_queue.workers.link import GatewayLink
from nova_queue.workers.redis_wait import wait_for_redis


class PoolTiming(TypedDict):
    """The lease timing of the pool a worker joins (a gateway's may differ from the
    worker's own settings: the gateway's win)."""

    lease_ttl_s: float
    heartbeat_interval_s: float


class Hello(PoolTiming, total=False):
    """What joining says: the pool's lease timing and, through a gateway, the worker id it
    gives this process (a direct worker names itself from its node)."""

    worker_id: str


@runtime_checkable
class WorkerTransport(Protocol):
    """Every call a worker makes of its pool (see the module docstring)."""

    # ---- joining ----------------------------------------------------------------------------
    def hello(self, stop: threading.Event) -> Hello | None:
        """Wait until the pool answers (None if ``stop`` is set first) and check its
        protocol; the pool's timing, and the worker id if the pool gives one."""
        ...

    def register_worker(self, worker_id: str, fields: Mapping[str, Any], apps: Iterable[str],
                        bench: Mapping[str, Mapping[str, float | None]] | None = None) -> bool:
        """Join the fleet (or re-join); True if the id was known before."""
        ...

    def deregister_worker(self, worker_id: str) -> int:
        """Leave the fleet; leases still held return to pending. How many did."""
        ...

    # ---- waiting for work -------------------------------------------------------------------
    def event_mark(self) -> str | None:
        """Where the wait for work starts: taken before a claim round, so that work that
        arrives during it ends the wait at once (None: from now)."""
        ...

    def wait_for_work(self, after: str | None, wait_s: float, stop: threading.Event) -> None:
        """Sleep up to ``wait_s`` (a claim's hint); return early when work arrives."""
        ...

    # ---- the fenced calls -------------------------------------------------------------------
    def claim(self, worker_id: str, app: str, k: int = 1,
              attempt_ids: Sequence[str] | None = None) -> ClaimResult:
        """Lease up to ``k`` tasks of ``app`` (or learn when to ask again)."""
        ...

    def renew(self, worker_id: str, leases: Iterable[Lease]) -> RenewResult:
        """Heartbeat: extend held leases; report lost ones."""
        ...

    #: The largest result a commit may carry itself (held in Redis, not uploaded); 0: none.
    inline_limit: int

    def complete(self, worker_id: str, lease: Lease, result_key: str, *, run_s: float,
                 warm: bool, meta: Mapping[str, Any] | None = None,
                 inline: bytes = b"") -> CompleteResult:
        """Commit one result, uploaded under ``result_key`` or carried ``inline`` (1 to
        :attr:`inline_limit` bytes); StaleResultError if the lease is not current."""
        ...

    def complete_and_claim(self, worker_id: str, lease: Lease, result_key: str, *,
                           run_s: float, warm: bool, meta: Mapping[str, Any] | None = None,
                           inline: bytes = b"", app: str | None = None, k: int = 1,
                           attempt_ids: Sequence[str] | None = None,
                           ) -> tuple[CompleteResult, ClaimResult | None]:
        """``complete``, then ``claim`` in the same round trip."""
        ...

    def complete_batch(self, worker_id: str, commits: Sequence[BatchCommit], *,
                       app: str | None = None, k: int = 1,
                       attempt_ids: Sequence[str] | None = None) -> BatchResult:
        """Commit up to 64 results (uploaded, or inline as ``complete``'s), each fenced and
        answered on its own; with
        ``app``, then claim in the same round trip."""
        ...

    def fail(self, worker_id: str, lease: Lease, kind: str, message: str = "", *,
             batch: int = 1) -> FailResult:
        """Report a failed run of a lease."""
        ...

    def note_loaded(self, worker_id: str, app: str, model: str, load_s: float) -> int:
        """The worker loaded ``model`` for ``app`` in ``load_s`` (it holds it warm now)."""
        ...

    def note_loading(self, worker_id: str, app: str, model: str, *, start: bool = True) -> int:
        """The worker starts (or stops) loading ``model`` for ``app``."""
        ...

    # ---- results ----------------------------------------------------------------------------
    def upload(self, key: str, data: bytes, content_type: str,
               metadata: Mapping[str, str]) -> None:
        """Put a result under its write-once ``key`` before its commit. ``metadata`` names
        the attempt (``attempt-id``): a key that holds that attempt's object already is
        its own earlier upload. Raises ObjectExistsError (the key holds another
        attempt's object), ResultTooLargeError, or StoreError."""
        ...

    def discard(self, key: str) -> None:
        """The commit of ``key`` was refused: its result is not wanted (StoreError if it
        cannot be removed)."""
        ...

    #: Whether it can fetch another worker's result to verify it (:meth:`candidate`).
    verifies: bool

    def candidate(self, lease: Lease, slot: str) -> bytes:
        """A verification lease's candidate result ``slot`` (``cand``, ``cand2``): its bytes
        (StoreError, ObjectNotFoundError when they cannot be read)."""
        ...

    def verification(self, lease: Lease) -> dict[str, str] | None:
        """The candidates (``{"cand": key, ...}``) of ``lease``'s task when this attempt,
        a backup, became their verification after it was claimed (the other attempt's
        maker is not vouched for and committed first: a free sample); else None."""
        ...


class DirectTransport:
    """A worker's calls straight to Redis (a :class:`~nova_queue.client.NovaClient`) and
    its results to the store (opened at :meth:`hello` unless given)."""

    def __init__(self, client: NovaClient, settings: Settings,
                 store: ResultStore | None = None):
        self.client = client
        self.settings = settings
        self.store = store
        self.inline_limit = settings.inline_result_bytes

    # ---- joining ----------------------------------------------------------------------------
    def hello(self, stop: threading.Event) -> Hello | None:
        """Wait for Redis, check the namespace's protocol (register checks it again), open
        the store: bad credentials or releases fail before minutes of set-up."""
        if not wait_for_redis(self.client.redis.ping, self.settings.redis_url, stop):
            return None
        protocol.check(self.client.redis, self.client.keys)
        if self.store is None:
            self.store = open_store(self.settings.resolved_store_url,
                                    public_endpoint=self.settings.s3_public_endpoint)
        return Hello(lease_ttl_s=self.settings.lease_ttl_s,
                     heartbeat_interval_s=self.settings.heartbeat_interval_s)

    def register_worker(self, worker_id: str, fields: Mapping[str, Any], apps: Iterable[str],
                        bench: Mapping[str, Mapping[str, float | None]] | None = None) -> bool:
        return self.client.register_worker(worker_id, fields, apps, bench)

    def deregister_worker(self, worker_id: str) -> int:
        return self.client.deregister_worker(worker_id)

    # ---- waiting for work -------------------------------------------------------------------
    def event_mark(self) -> str | None:
        return wake.event_mark(self.client)

    def wait_for_work(self, after: str | None, wait_s: float, stop: threading.Event) -> None:
        """Wake on the event stream as soon as a job is enqueued or a task requeued."""
        wake.wait_for_work(self.client, after, wait_s, stop)

    # ---- the fenced calls -------------------------------------------------------------------
    def claim(self, worker_id: str, app: str, k: int = 1,
              attempt_ids: Sequence[str] | None = None) -> ClaimResult:
        return self.client.claim(worker_id, app, k, attempt_ids)

    def renew(self, worker_id: str, leases: Iterable[Lease]) -> RenewResult:
        return self.client.renew(worker_id, leases)

    def complete(self, worker_id: str, lease: Lease, result_key: str, *, run_s: float,
                 warm: bool, meta: Mapping[str, Any] | None = None,
                 inline: bytes = b"") -> CompleteResult:
        return self.client.complete(worker_id, lease, result_key, run_s=run_s, warm=warm,
                                    meta=meta, inline=inline)

    def complete_and_claim(self, worker_id: str, lease: Lease, result_key: str, *,
                           run_s: float, warm: bool, meta: Mapping[str, Any] | None = None,
                           inline: bytes = b"", app: str | None = None, k: int = 1,
                           attempt_ids: Sequence[str] | None = None,
                           ) -> tuple[CompleteResult, ClaimResult | None]:
        return self.client.complete_and_claim(worker_id, lease, result_key, run_s=run_s,
                                              warm=warm, meta=meta, inline=inline, app=app,
                                              k=k, attempt_ids=attempt_ids)

    def complete_batch(self, worker_id: str, commits: Sequence[BatchCommit], *,
                       app: str | None = None, k: int = 1,
                       attempt_ids: Sequence[str] | None = None) -> BatchResult:
        return self.client.complete_batch(worker_id, commits, app=app, k=k,
                                          attempt_ids=attempt_ids)

    def fail(self, worker_id: str, lease: Lease, kind: str, message: str = "", *,
             batch: int = 1) -> FailResult:
        return self.client.fail(worker_id, lease, kind, message, batch=batch)

    def note_loaded(self, worker_id: str, app: str, model: str, load_s: float) -> int:
        return self.client.note_loaded(worker_id, app, model, load_s)

    def note_loading(self, worker_id: str, app: str, model: str, *, start: bool = True) -> int:
        return self.client.note_loading(worker_id, app, model, start=start)

    # ---- results ----------------------------------------------------------------------------
    def upload(self, key: str, data: bytes, content_type: str,
               metadata: Mapping[str, str]) -> None:
        """Write-once put; a key that exists is this attempt's own retried put (its first
        reply was lost) if the object carries the attempt's id."""
        store = self._store()
        try:
            store.put(key, data, content_type, dict(metadata))
        except ObjectExistsError:
            info = store.head(key)
            if not (info and info.metadata.get("attempt-id") == metadata.get("attempt-id")):
                raise

    def discard(self, key: str) -> None:
        """Delete the refused commit's object (its attempt's own: no task points at it)."""
        self._store().delete(key)

    verifies = True

    def candidate(self, lease: Lease, slot: str) -> bytes:
        """The candidate held inline (``inline:<task>`` field ``slot``), else the store's
        object under its result key (:func:`~nova_queue.results.candidate_bytes`)."""
        data = candidate_bytes(self.client.redis, self.client.keys, self._store(),
                               lease.task_id, slot, (lease.verify or {}).get(slot))
        if data is None:
            raise ObjectNotFoundError(f"{lease.task_id}: no candidate {slot}")
        return data

    def verification(self, lease: Lease) -> dict[str, str] | None:
        """The task's candidates, read from Redis, when ``lease`` is the task's lease now."""
        gen, attempt_id, cand, cand2 = self.client.redis.hmget(
            self.client.keys.task(lease.task_id), ["lease_gen", "attempt_id", "cand", "cand2"])
        if (gen, attempt_id) != (str(lease.lease_gen), lease.attempt_id) or not cand:
            return None
        return {"cand": cand, **({"cand2": cand2} if cand2 else {})}

    def _store(self) -> ResultStore:
        if self.store is None:
            raise RuntimeError("DirectTransport: hello() opens the store before any upload")
        return self.store


def open_transport(settings: Settings, *, client: NovaClient | None = None,
                   store: ResultStore | None = None) -> WorkerTransport:
    """Through a gateway when ``settings`` name one (``--gateway``) and no client is given;
    else straight to Redis (``client``, or one from ``settings``) and the store."""
    if settings.gateway_url and client is None:
        return GatewayLink(settings)
    return DirectTransport(client or NovaClient.from_settings(settings), settings, store)
