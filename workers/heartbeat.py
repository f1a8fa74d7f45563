"""The heartbeat thread: renews the worker's liveness and leases at a fixed interval.

It runs on its own thread (heavy work in the main thread cannot starve it: torch and
hashlib release the GIL) and keeps the set of leases the worker holds. A lease the
renewal reports lost is flagged, and the worker drops that task's result; ``on_lost`` hears
of it at once (the worker abandons a running batch whose every lease is lost).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import redis

from nova_queue.errors import AccessDeniedError, ProtocolMismatchError, TokenError
from nova_queue.models import Lease
from nova_queue.workers.transport import WorkerTransport

log = logging.getLogger(__name__)


class Heartbeat(threading.Thread):
    """Renews ``worker_id`` every ``interval_s``; ``rejoin`` is called if it was declared lost."""

    def __init__(self, client: WorkerTransport, worker_id: str, interval_s: float,
                 rejoin: Callable[[], None],
                 on_lost: Callable[[dict[str, str]], None] | None = None):
        super().__init__(name="nova-heartbeat", daemon=True)
        self.client = client
        self.worker_id = worker_id
        self.interval_s = interval_s
        self.rejoin = rejoin
        self.on_lost = on_lost
        self._lock = threading.Lock()
        self._leases: dict[str, Lease] = {}
        self._lost: set[str] = set()
        self._halt = threading.Event()
        #: monotonic time of the last successful renewal
        self.last_ok = time.monotonic()
        self.beats = 0
        #: set when a renewal was refused for the namespace's protocol, or by the gateway
        #: for the worker's token (the loop stops)
        self.refused: ProtocolMismatchError | TokenError | AccessDeniedError | None = None

    # ---- lease bookkeeping (called from the main thread) ----
    def hold(self, leases: list[Lease]) -> None:
        """Start renewing these leases."""
        with self._lock:
            for lease in leases:
                self._leases[lease.task_id] = lease
                self._lost.discard(lease.task_id)

    def drop(self, lease: Lease) -> None:
        """Stop renewing a lease (committed, failed or abandoned)."""
        with self._lock:
            self._leases.pop(lease.task_id, None)
            self._lost.discard(lease.task_id)

    def is_lost(self, lease: Lease) -> bool:
        """Whether a renewal reported this lease lost."""
        with self._lock:
            return lease.task_id in self._lost

    def held(self) -> list[Lease]:
        """The leases being renewed."""
        with self._lock:
            return list(self._leases.values())

    def lost_ids(self) -> frozenset[str]:
        """Task ids of held leases a renewal reported lost."""
        with self._lock:
            return frozenset(self._lost)

    # ---- the thread ----
    def stop(self) -> None:
        """Stop after the current beat."""
        self._halt.set()

    def run(self) -> None:
        while not self._halt.wait(self.interval_s):
            self.beat()

    def beat(self) -> None:
        """One renewal; errors are logged, never raised (the next beat retries). A lease
        reported lost is not renewed again (the worker drops it when it gets to it)."""
        with self._lock:
            leases = [lease for t, lease in self._leases.items() if t not in self._lost]
        try:
            res = self.client.renew(self.worker_id, leases)
        except redis.RedisError as exc:
            log.warning("heartbeat failed (%s); retrying in %.1f s", exc, self.interval_s)
            return
        except (ProtocolMismatchError, TokenError, AccessDeniedError) as exc:
            # the namespace moved on, or the gateway revoked the token: beating cannot help
            log.error("heartbeat stopped: %s", exc)
            self.refused = exc
            self._halt.set()
            return
        self.last_ok = time.monotonic()
        self.beats += 1
        if res.lost:
            with self._lock:
                self._lost.update(t for t in res.lost if t in self._leases)
            log.warning("lost %d lease(s): %s", len(res.lost), ", ".join(
                f"{t} ({res.reasons.get(t, 'lost')})" for t in res.lost))
            if self.on_lost is not None:
                self.on_lost({t: res.reasons.get(t, "lost") for t in res.lost})
        if res.worker_lost:
            log.warning("this worker was declared lost (partition or stall); joining again")
            try:
                self.rejoin()
            except redis.RedisError as exc:
                log.warning("re-joining failed (%s); retrying next beat", exc)
