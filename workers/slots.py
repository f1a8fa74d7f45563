"""Task slots: ``nova-queue worker --concurrency N`` (env ``NOVA_CONCURRENCY``) runs up to N
batches of a run at once in one process, for apps whose spec declares it safe
(``AppSpec.concurrent``: thread-safe or waiting on I/O, as ``synthetic``); any other app
(``txt2img``: a GPU app batches its tasks instead) keeps one slot, and the worker says so
once at start. One process means one registration and one heartbeat for all slots; every
task keeps its own lease, renewed and fenced as with one slot.

The slots are threads that only run the app; the worker's main thread uploads and commits
each batch's results as it ends (in one call for a run of cheap tasks, held at most
``MAX_HOLD_S`` while other slots run on), and is the one a stop signal or an abandonment
interrupts: it waits for the slots in between, with
``Executor.in_app`` set (a stop that came while it committed ends the wait at once). An
abandonment (every running lease lost) or a stop drops the batches still running; their
threads finish on their own and their results are not committed. The interpreter joins
every pool thread when it exits, so a dropped thread whose app never returns would keep
the process from exiting: the worker's shutdown waits for them (:func:`dropped_running`)
until ``NOVA_ABANDON_GRACE_S`` after the drop, then exits with code 75
(:meth:`~nova_queue.workers.abandon.Abandoner.exit_if_slots_run_on`).
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
import logging
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from nova_queue.models import Lease
from nova_queue.workers.apps import WorkerApp

if TYPE_CHECKING:
    from nova_queue.workers.execute import Executor, _Run

log = logging.getLogger(__name__)

#: batches of this process dropped while their app still ran: (when dropped, future)
_dropped: list[tuple[float, cf.Future]] = []
_dropped_lock = threading.Lock()


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
    from nova_queue.workers.execute import (
        MAX_HOLD_S,
        TaskAbandoned,
        WorkerShutdown,
        run_app,
        task_input,
    )

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
                if ex.stop_event.is_set():  # the signal came while this thread committed
                    raise WorkerShutdown()
                # results held for one commit wait MAX_HOLD_S at most, slots running or not
                hold = (max(0.0, MAX_HOLD_S - (time.perf_counter() - run.ready_since))
                        if run.ready else None)
                done, waiting = cf.wait(waiting, timeout=hold, return_when=cf.FIRST_COMPLETED)
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
        _note_dropped(ex.spec.name, futures)


def dropped_running() -> list[tuple[float, cf.Future]]:
    """Batches of this process dropped while their app ran whose app has not returned yet
    (their threads keep the interpreter from exiting): (when dropped, future)."""
    with _dropped_lock:
        _dropped[:] = [(t, f) for t, f in _dropped if not f.done()]
        return list(_dropped)


def _note_dropped(app: str, futures: Mapping[cf.Future, Any]) -> None:
    """Remember the batches whose app still runs once the pool is dropped (the others were
    cancelled or are done); each logs when it returns late."""
    now = time.monotonic()
    running = [f for f in futures if not f.done()]
    if not running:
        return
    with _dropped_lock:
        _dropped.extend((now, f) for f in running)
    for fut in running:
        fut.add_done_callback(functools.partial(_returned_late, app, now))


def _returned_late(app: str, dropped_at: float, fut: cf.Future) -> None:
    log.info("a dropped batch of %s returned %.1f s after it was dropped; its result is "
             "discarded", app, time.monotonic() - dropped_at)
