"""What the worker claims next, kept in one place.

A worker claims leases with ``claim``, and the commit of a run's last task claims the next
ones in the same round trip (``complete_claim``): its answer is *prefetched* and the next
claim for that app returns it without asking Redis again. A claim whose reply was lost
(Redis unreachable) leaves its attempt ids *in doubt*: the next claim for that app sends
the same ids, so a claim that did run returns the leases it made instead of orphaning
them (``claim-12``). How many tasks to ask for: the batch size of the app's last job (its
params), or more for cheap tasks: enough tasks that their measured work covers
:data:`COVER_CALLS` commit calls (:meth:`Claims.note_timing`; the claim's completion-time
rule still trims a batch at the tail), or enough to fill the app's task slots
(``--concurrency``), at most 64, within ``--max-tasks``. :class:`Claims`
owns all of this; the executor only returns, from its commit, what its combined claim
answered.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import secrets
from collections.abc import Callable, Mapping
from typing import Any

import redis

from nova_queue.limits import MAX_CLAIM_K
from nova_queue.models import ClaimResult
from nova_queue.workers.apps import WorkerApp
from nova_queue.workers.transport import WorkerTransport

log = logging.getLogger(__name__)

#: A claim of cheap tasks asks for enough of them that their work takes this many of the
#: worker's commit calls (claim and commit overhead then stays a fraction of the work).
COVER_CALLS = 4
#: Weight of a new run in the moving averages of task time and commit-call time.
TIMING_ALPHA = 0.3


@dataclasses.dataclass(frozen=True)
class NextClaim:
    """A claim for ``app`` with these attempt ids, made by the commit of a run's last task."""

    app: str
    attempt_ids: tuple[str, ...]


class Claims:
    """The worker's claim state: prefetched answers, attempt ids in doubt, batch-size
    hints and the ``--max-tasks`` budget (``done`` counts committed tasks)."""

    def __init__(self, client: WorkerTransport, worker_id: str, apps: Mapping[str, WorkerApp], *,
                 max_tasks: int | None, stopping: Callable[[], bool],
                 slots: Mapping[str, int] | None = None):
        self.client = client
        self.worker_id = worker_id
        self.apps = apps
        #: task slots per app (``--concurrency``): a claim asks for enough to fill them
        self.slots = dict(slots or {})
        self.max_tasks = max_tasks
        self._stopping = stopping
        #: tasks committed so far
        self.done = 0
        self._prefetched: dict[str, ClaimResult] = {}
        self._in_doubt: dict[str, tuple[str, ...]] = {}
        self._params: dict[str, dict[str, Any]] = {}
        #: the quarantine reason last logged ("" while not quarantined)
        self._quarantine = ""
        #: moving averages: seconds of work per task by app, seconds per commit call
        self._task_s: dict[str, float] = {}
        self._call_s: float | None = None

    def reached_max(self) -> bool:
        """Whether ``--max-tasks`` tasks are committed."""
        return self.max_tasks is not None and self.done >= self.max_tasks

    def claim(self, app: str) -> ClaimResult:
        """The next leases of ``app``: what the last commit claimed, else a ``claim`` call
        (with the attempt ids in doubt, if any). A Redis error leaves its ids in doubt."""
        prefetched = self._prefetched.pop(app, None)
        if prefetched is not None:  # the last commit already claimed (one round trip)
            return self._noted(prefetched)
        ids = self._in_doubt.pop(app, None) or self._fresh_ids(app, self.done)
        try:
            return self._noted(self.client.claim(self.worker_id, app, len(ids), attempt_ids=ids))
        except redis.RedisError:
            self._in_doubt[app] = ids
            raise

    def _noted(self, result: ClaimResult) -> ClaimResult:
        """Say once per quarantine why claims are refused, and when they no longer are."""
        if result.status == "quarantined" and result.reason != self._quarantine:
            log.warning("quarantined: claims refused (%s); a probe task follows the cool-down, "
                        "or 'nova-queue quarantine release %s' lets this worker back now",
                        result.reason, self.worker_id)
        elif result.status != "quarantined" and self._quarantine:
            log.info("claims are no longer refused: the quarantine was lifted, or this is its "
                     "probe task (whose commit lifts it)")
        self._quarantine = result.reason if result.status == "quarantined" else ""
        return result

    def next_claim(self, app: str, committed: int) -> NextClaim | None:
        """What the commit that brings a run to ``committed + 1`` commits should also claim:
        ``app``'s next tasks, unless the worker is stopping, holds attempt ids in doubt for
        ``app``, or reaches ``--max-tasks`` with that commit."""
        done = self.done + committed + 1
        if self._stopping() or app in self._in_doubt:
            return None
        if self.max_tasks is not None and done >= self.max_tasks:
            return None
        return NextClaim(app, self._fresh_ids(app, done))

    def settle(self, committed: int, claimed: tuple[str, ClaimResult] | None,
               in_doubt: NextClaim | None) -> None:
        """Take in what a run did: its commits, what its last commit claimed, or the claim
        whose outcome is unknown."""
        self.done += committed
        if claimed is not None:
            self._prefetched[claimed[0]] = claimed[1]
        if in_doubt is not None:
            self._in_doubt[in_doubt.app] = in_doubt.attempt_ids

    def note_timing(self, app: str, tasks: int, work_s: float, calls: int,
                    calls_s: float) -> None:
        """A run of ``tasks`` tasks of ``app`` worked ``work_s`` seconds (running and
        uploading, commits not counted) and made ``calls`` commit calls in ``calls_s``."""
        if tasks > 0 and work_s >= 0:
            task_s = work_s / tasks
            old = self._task_s.get(app)
            self._task_s[app] = task_s if old is None else old + TIMING_ALPHA * (task_s - old)
        if calls > 0:
            call_s = calls_s / calls
            old_call = self._call_s
            self._call_s = call_s if old_call is None else (
                old_call + TIMING_ALPHA * (call_s - old_call))

    def cheap_k(self, app: str) -> int:
        """How many tasks of ``app`` cover COVER_CALLS commit calls of work (1 until both
        are measured; at most 64)."""
        task_s, call_s = self._task_s.get(app), self._call_s
        if task_s is None or call_s is None:
            return 1
        want = COVER_CALLS * call_s / max(task_s, 1e-6)
        return max(1, min(MAX_CLAIM_K, math.ceil(want)))

    def note_params(self, app: str, raw: Mapping[str, Any]) -> None:
        """Size the next claims of ``app`` for a job with these params (e.g. its image size)."""
        try:
            self._params[app] = self.apps[app].spec.parse_params(raw)
        except Exception:  # noqa: BLE001 - bad params are reported by the executor
            self._params.pop(app, None)

    def _fresh_ids(self, app: str, done: int) -> tuple[str, ...]:
        """New attempt ids for a claim of ``app``: the runner's batch size for the last
        job's params (defaults at first), or cheap_k, or the app's task slots, whichever is
        most, within ``--max-tasks``."""
        worker_app = self.apps[app]
        params = self._params.get(app) or worker_app.spec.parse_params({})
        k = max(1, int(worker_app.runner.batch_size(params)), self.cheap_k(app),
                min(self.slots.get(app, 1), MAX_CLAIM_K))
        if self.max_tasks is not None:
            k = max(1, min(k, self.max_tasks - done))
        return tuple(secrets.token_hex(8) for _ in range(k))
