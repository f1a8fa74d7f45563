"""What the worker claims next, kept in one place.

A worker claims leases with ``claim``, and the commit of a run's last task claims the next
ones in the same round trip (``complete_claim``): its answer is *prefetched* and the next
claim for that app returns it without asking Redis again. A claim whose reply was lost
(Redis unreachable) leaves its attempt ids *in doubt*: the next claim for that app sends
the same ids, so a claim that did run returns the leases it made instead of orphaning
them (``claim-12``). How many tasks to ask for follows the batch size of the app's last
job (its params), within ``--max-tasks``. :class:`Claims` owns all of this; the executor
only returns, from its commit, what its combined claim answered.
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
from collections.abc import Callable, Mapping
from typing import Any

import redis

from nova_queue.client import NovaClient
from nova_queue.models import ClaimResult
from nova_queue.workers.apps import WorkerApp

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class NextClaim:
    """A claim for ``app`` with these attempt ids, made by the commit of a run's last task."""

    app: str
    attempt_ids: tuple[str, ...]


class Claims:
    """The worker's claim state: prefetched answers, attempt ids in doubt, batch-size
    hints and the ``--max-tasks`` budget (``done`` counts committed tasks)."""

    def __init__(self, client: NovaClient, worker_id: str, apps: Mapping[str, WorkerApp], *,
                 max_tasks: int | None, stopping: Callable[[], bool]):
        self.client = client
        self.worker_id = worker_id
        self.apps = apps
        self.max_tasks = max_tasks
        self._stopping = stopping
        #: tasks committed so far
        self.done = 0
        self._prefetched: dict[str, ClaimResult] = {}
        self._in_doubt: dict[str, tuple[str, ...]] = {}
        self._params: dict[str, dict[str, Any]] = {}
        #: the quarantine reason last logged ("" while not quarantined)
        self._quarantine = ""

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
        """Say once per quarantine why claims are refused."""
        if result.status == "quarantined" and result.reason != self._quarantine:
            log.warning("quarantined: claims refused (%s); a probe task follows the cool-down, "
                        "or 'nova-queue quarantine release %s' lets this worker back now",
                        result.reason, self.worker_id)
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

    def note_params(self, app: str, raw: Mapping[str, Any]) -> None:
        """Size the next claims of ``app`` for a job with these params (e.g. its image size)."""
        try:
            self._params[app] = self.apps[app].spec.parse_params(raw)
        except Exception:  # noqa: BLE001 - bad params are reported by the executor
            self._params.pop(app, None)

    def _fresh_ids(self, app: str, done: int) -> tuple[str, ...]:
        """New attempt ids for a claim of ``app``: the runner's batch size for the last
        job's params (defaults at first), within ``--max-tasks``."""
        worker_app = self.apps[app]
        params = self._params.get(app) or worker_app.spec.parse_params({})
        k = max(1, int(worker_app.runner.batch_size(params)))
        if self.max_tasks is not None:
            k = max(1, min(k, self.max_tasks - done))
        return tuple(secrets.token_hex(8) for _ in range(k))
