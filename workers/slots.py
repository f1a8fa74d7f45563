"""Task slots: ``nova-queue worker --concurrency N`` (env ``NOVA_CONCURRENCY``) runs up to N
batches of a run at once in one process, for apps whose spec declares it safe
(``AppSpec.concurrent``: thread-safe or waiting on I/O, as ``synthetic``); any other app
(``txt2img``: a GPU app batches its tasks instead) keeps one slot, and the worker says so
once at start. One process means one registration and one heartbeat for all slots; every
task keeps its own lease, renewed and fenced as with one slot.

The slots are threads that only run the app (:class:`SlotPool`); the executor
(``execute.py``) starts a job's batches on them and, in the worker's main thread, takes
each batch's outputs as it ends (uploaded and committed: in one call for a run of cheap
tasks, held at most ``MAX_HOLD_S`` while other slots run on); the main thread is the one a
stop signal or an abandonment interrupts, while it waits for the slots (its
``RunningBatch`` is ``in_app`` then). An abandonment (every running lease lost) or a stop
drops the batches still running; their threads finish on their own and their results are
not committed. The interpreter joins every pool thread when it exits, so a dropped thread
whose app never returns would keep the process from exiting: the pool hands such batches
to the abandonment (:class:`~nova_queue.workers.abandon.DroppedBatches`), and the
worker's shutdown waits for them until ``NOVA_ABANDON_GRACE_S`` after the drop, then exits
with code 75 (:meth:`~nova_queue.workers.abandon.Abandoner.exit_if_slots_run_on`).
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
from collections.abc import Callable, Mapping
from typing import Any

from nova_queue.models import Lease
from nova_queue.workers.abandon import DroppedBatches
from nova_queue.workers.apps import WorkerApp

log = logging.getLogger(__name__)


def app_slots(apps: Mapping[str, WorkerApp], concurrency: int) -> dict[str, int]:
    """Task slots per app: ``concurrency`` for an app that declares itself safe to run
    tasks at once, else 1 (logged once)."""
    slots: dict[str, int] = {}
    for name, app in apps.items():
        safe = bool(getattr(app.spec, "concurrent", False))
        slots[name] = concurrency if safe else 1
        if concurrency > 1 and not safe:
            log.info("%s runs one task at a time: it does not declare itself safe to run "
                     "tasks at once (--concurrency %d applies to the other apps)",
                     name, concurrency)
        elif concurrency > 1:
            log.info("%s runs up to %d tasks at once", name, concurrency)
    return slots


class SlotPool:
    """Batches of one job of ``app`` running on up to ``slots`` threads, each only calling
    ``run(batch)`` (the app); :meth:`close` drops what still runs."""

    def __init__(self, app: str, slots: int, dropped: DroppedBatches):
        self._app, self._dropped = app, dropped
        self._pool = cf.ThreadPoolExecutor(max_workers=slots,
                                           thread_name_prefix=f"{app}-slot")
        self._batches: dict[cf.Future, list[Lease]] = {}
        self._waiting: set[cf.Future] = set()

    def start(self, batches: list[list[Lease]], run: Callable[[list[Lease]], Any]) -> None:
        """Submit each batch: up to ``slots`` run at once, the others as slots free up."""
        for batch in batches:
            self._batches[self._pool.submit(run, batch)] = batch
        self._waiting = set(self._batches)

    @property
    def running(self) -> list[list[Lease]]:
        """The batches not handed back yet by :meth:`wait` (running, or not started)."""
        return [self._batches[f] for f in self._waiting]

    def task_ids(self) -> frozenset[str]:
        """The task ids of the batches not handed back yet."""
        return frozenset(x.task_id for f in self._waiting for x in self._batches[f])

    def wait(self, timeout_s: float | None) -> list[tuple[list[Lease], cf.Future]]:
        """The batches that ended, each with its future, once one has (or ``timeout_s``
        passed: none)."""
        done, self._waiting = cf.wait(self._waiting, timeout=timeout_s,
                                      return_when=cf.FIRST_COMPLETED)
        return [(self._batches[f], f) for f in done]

    def close(self) -> None:
        """Cancel the batches not started; drop those still running (noted in ``dropped``:
        their threads finish on their own, and their results are not taken)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._dropped.note(self._app, self._batches)
