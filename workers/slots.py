"""Task slots: ``nova-queue worker --concurrency N`` (env ``NOVA_CONCURRENCY``) runs up to N
batches of a run at once in one process, for apps whose spec declares it safe
(``AppSpec.concurrent``: thread-safe or waiting on I/O, as ``synthetic``); any other app
(``txt2img``: a GPU app batches its tasks instead) keeps one slot, and the worker says so
once at start. One process means one registration and one heartbeat for all slots; every
task keeps its own lease, renewed and fenced as with one slot.

The slots are threads that only run the app; the worker's main thread uploads and commits
each batch's results as it ends (in one call for a run of cheap tasks), and is the one a
stop signal or an abandonment interrupts: it waits for the slots in between, with
``Executor.in_app`` set, and an abandonment (every running lease lost) drops the batches
still running; their threads finish on their own and their results are not committed.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from nova_queue.models import Lease
from nova_queue.workers.apps import WorkerApp

if TYPE_CHECKING:
    from nova_queue.workers.execute import Executor, _Run

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


def run_batches(ex: Executor, run: _Run, batches: list[list[Lease]],
                params: dict[str, Any]) -> None:
    """Run ``batches`` of one job on ``ex.slots`` threads; upload and commit each batch's
    results in the main thread as it ends."""
    from nova_queue.workers.execute import MAX_HOLD_S, TaskAbandoned, run_app, task_input

    live = [b for b in ([x for x in batch if not ex._lost(run, x)] for batch in batches) if b]
    if not live:
        return
    warm = ex.ran_once
    pool = cf.ThreadPoolExecutor(max_workers=ex.slots, thread_name_prefix=f"{ex.spec.name}-slot")
    futures = {pool.submit(run_app, ex.runner, ex.ctx, [task_input(x, params) for x in b]): b
               for b in live}
    waiting: set[cf.Future] = set(futures)
    ex.batch_seq += 1
    try:
        while waiting:
            ex.running = frozenset(x.task_id for f in waiting for x in futures[f])
            if ex.running <= ex.heartbeat.lost_ids():
                # the leases of the batches left were lost while other slots ran: the
                # heartbeat abandons only when a loss is reported, so drop them here
                raise TaskAbandoned()
            ex.in_app = True
            try:
                done, waiting = cf.wait(waiting, return_when=cf.FIRST_COMPLETED)
            finally:
                ex.in_app = False
            for fut in done:
                ex._take_result(run, futures[fut], fut, warm)
            if run.ready and time.perf_counter() - run.ready_since >= MAX_HOLD_S:
                ex._flush(run, last=False)
    except TaskAbandoned:
        left = [x for f in waiting for x in futures[f]]
        log.warning("abandoned %d task(s) of %s while running: %s", len(left), ex.spec.name,
                    ", ".join(x.task_id for x in left))
        for x in left:
            ex.heartbeat.drop(x)
        run.outcome.abandoned += len(left)
    finally:
        ex.running = frozenset()
        pool.shutdown(wait=False, cancel_futures=True)
