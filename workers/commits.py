"""How the worker commits uploaded results: one at a time (``complete``, or
``complete_claim`` with the next claim), or a run of them in one call (``complete_batch``:
the results of several cheap tasks, each fenced on its own, with the next claim), through
its transport (Redis, or a gateway: ``workers/transport.py``). Every commit retries while
the pool is unreachable, for at most :data:`COMMIT_RETRY_S` and never past a stop
request; each retry is idempotent (same leases, keys and attempt ids). A batch refused
whole (one bad commit: nothing is written) is committed one by one, so only that one is
refused.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import redis

from nova_queue.client import BatchCommit
from nova_queue.errors import AccessDeniedError, InputError, StaleResultError, TaskNotFoundError
from nova_queue.models import ClaimResult, Lease
from nova_queue.workers.claims import NextClaim

if TYPE_CHECKING:
    from nova_queue.workers.transport import WorkerTransport

log = logging.getLogger(__name__)

#: How long a worker keeps retrying a commit while Redis is unreachable.
COMMIT_RETRY_S = 60.0
#: Pause between two tries of a commit.
COMMIT_RETRY_INTERVAL_S = 1.0


@dataclasses.dataclass(frozen=True)
class Commit:
    """How a commit ended: ``committed``, ``stale`` (the fence refused it: the lease is gone),
    ``refused`` (an argument was refused before anything was written; through a gateway,
    also a call it denies: the lease is still held) or ``unknown``."""

    state: str
    claimed: ClaimResult | None = None
    error: str = ""


@dataclasses.dataclass(frozen=True)
class Ready:
    """A result waiting for its commit: uploaded under ``key``, or carried ``inline`` (a
    small one: the commit writes it to Redis; nothing is uploaded under ``key``)."""

    lease: Lease
    key: str
    run_s: float
    warm: bool
    meta: dict[str, Any]
    inline: bytes = b""


class Committer:
    """Commits for one worker through its transport (``client``). ``calls_s`` /
    ``calls``: wall seconds and count of the commit calls that returned."""

    def __init__(self, client: WorkerTransport, worker_id: str, stop_event: threading.Event):
        self.client, self.worker_id, self.stop_event = client, worker_id, stop_event
        self.calls_s, self.calls = 0.0, 0

    def one(self, r: Ready, plan: NextClaim | None) -> Commit:
        """Commit one result (``complete``, or ``complete_claim`` with ``plan``)."""
        def send() -> Commit:
            if plan is None:
                self.client.complete(self.worker_id, r.lease, r.key, run_s=r.run_s,
                                     warm=r.warm, meta=r.meta, inline=r.inline)
                return Commit("committed")
            _, claimed = self.client.complete_and_claim(
                self.worker_id, r.lease, r.key, run_s=r.run_s, warm=r.warm, meta=r.meta,
                inline=r.inline, app=plan.app, attempt_ids=plan.attempt_ids)
            # claimed is None when the worker is not registered: the next claim says so
            return Commit("committed", claimed=claimed)

        try:
            return self._retrying(send, r.lease.task_id)
        except StaleResultError as exc:
            return Commit("stale", error=str(exc))
        except (InputError, AccessDeniedError) as exc:
            return Commit("refused", error=str(exc))

    def many(self, ready: Sequence[Ready], plan: NextClaim | None) -> list[Commit]:
        """Commit a run's results in one ``complete_batch`` call (with ``plan``'s claim);
        one Commit per result, the claim's answer with the last."""
        def send() -> list[Commit]:
            res = self.client.complete_batch(
                self.worker_id, [BatchCommit(r.lease, r.key, r.run_s, r.warm, r.meta, r.inline)
                                 for r in ready],
                app=plan.app if plan else None, k=len(plan.attempt_ids) if plan else 1,
                attempt_ids=plan.attempt_ids if plan else None)
            out = [_answered(x) for x in res.results]
            out[-1] = dataclasses.replace(out[-1], claimed=res.claimed)
            return out

        what = f"{len(ready)} results ({ready[0].lease.task_id} ...)"
        try:
            got = self._retrying(send, what)
        except (InputError, AccessDeniedError) as exc:
            # refused whole for one commit (nothing written): each alone, so only it is
            log.warning("the commit of %s was refused (%s); committing them one by one",
                        what, exc)
            return [self.one(r, plan if i == len(ready) - 1 else None)
                    for i, r in enumerate(ready)]
        return [got] * len(ready) if isinstance(got, Commit) else got

    def _retrying(self, send: Callable[[], Any], what: str) -> Any:
        """``send()`` until it returns, retrying Redis errors; Commit("unknown") when the
        retries run out or a stop request ends them."""
        deadline = time.monotonic() + COMMIT_RETRY_S
        while True:
            started = time.perf_counter()
            try:
                out = send()
            except TaskNotFoundError as exc:  # the task is gone (its job was deleted)
                return Commit("stale", error=str(exc))
            except redis.RedisError as exc:
                if time.monotonic() > deadline:
                    log.error("could not commit %s (%s); leaving it to lease expiry", what, exc)
                    return Commit("unknown", error=str(exc))
                if self.stop_event.is_set():
                    break
                log.warning("commit of %s failed (%s); retrying", what, exc)
                if self.stop_event.wait(COMMIT_RETRY_INTERVAL_S):
                    break
                continue
            self.calls_s += time.perf_counter() - started
            self.calls += 1
            return out
        log.warning("stopping: the commit of %s is unconfirmed; keeping its object and "
                    "leaving the lease to expiry", what)
        return Commit("unknown", error="stopped while retrying")


#: A commit that held and claimed nothing (frozen: one object serves every such answer).
COMMITTED = Commit("committed")


def _answered(answer: Any) -> Commit:
    """One commit's answer in a batch: committed, stale (the fence, or its task is gone),
    or refused (its arguments: only a link committing a batch one by one answers so)."""
    if isinstance(answer, (InputError, AccessDeniedError)):
        return Commit("refused", error=str(answer))
    if isinstance(answer, Exception):
        return Commit("stale", error=str(answer))
    return COMMITTED
