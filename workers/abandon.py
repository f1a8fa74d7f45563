"""Abandoning a running batch whose every lease is lost.

A lease is lost while its app still runs when the task ran past its run-time limit (renew
times it out) or a backup attempt on another worker committed first (renew says
``superseded``). Its result is no longer wanted, so the worker stops the app and claims
again: the heartbeat thread sends the main thread SIGUSR1, whose handler raises
:class:`TaskAbandoned` inside the app (between two Python
bytecodes, or when a blocking call such as ``time.sleep`` is interrupted). An app stuck in
native code does not see that; after ``NOVA_ABANDON_GRACE_S`` the worker hands its other
leases back (deregister) and exits with :data:`EXIT_RESTART` (75) for its supervisor
(compose's ``restart: unless-stopped``, a systemd unit with ``Restart=on-failure``,
``nova-queue demo``) to start it again with a fresh device context. If even that cannot run
(native code holding the GIL), faulthandler dumps every thread's stack and exits (code 1)
:data:`HARD_EXIT_EXTRA_S` later.

With ``--concurrency`` the app runs on task-slot threads, which no signal reaches: the
worker drops an abandoned batch and runs on, and its thread finishes on its own. One whose
app never returns would keep the process from exiting (the interpreter joins every pool
thread), so the abandonment keeps them (:class:`DroppedBatches`, noted by the task slots
when they are dropped), and at shutdown, once the leases are handed back, the worker waits
for such threads until ``NOVA_ABANDON_GRACE_S`` after their batch was dropped (abandoned, or
stopped by the signal), then exits with :data:`EXIT_RESTART`
(:meth:`Abandoner.exit_if_slots_run_on`).

What runs is the executor's :class:`~nova_queue.workers.execute.RunningBatch` (a number,
its tasks, whether the main thread is in the app), read here from the heartbeat thread.

Only a worker that owns its process (the CLI calls :meth:`Abandoner.own_process`)
interrupts or exits; one embedded in another program only drops the result when the app
returns.
"""

from __future__ import annotations

import concurrent.futures as cf
import faulthandler
import functools
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from types import FrameType
from typing import TYPE_CHECKING

import redis

if TYPE_CHECKING:
    from nova_queue.workers.execute import Executor
    from nova_queue.workers.heartbeat import Heartbeat
    from nova_queue.workers.transport import WorkerTransport

log = logging.getLogger(__name__)

#: Exit code of a worker whose app did not stop after its batch was abandoned (EX_TEMPFAIL).
EXIT_RESTART = 75
#: After the grace, and this much more, faulthandler dumps the stacks and exits (code 1).
HARD_EXIT_EXTRA_S = 30.0


class TaskAbandoned(BaseException):
    """Raised inside a running batch whose every lease is lost (it ran past its run-time
    limit, or another attempt of it committed first): its result is no longer wanted."""


class DroppedBatches:
    """Batches of this process dropped while their app still ran on a task slot: (when
    dropped, future). Thread-safe; each logs when its app returns late."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._dropped: list[tuple[float, cf.Future]] = []

    def note(self, app: str, futures: Iterable[cf.Future]) -> None:
        """Keep those of ``futures`` whose app still runs (the others were cancelled or
        are done) as dropped now."""
        now = time.monotonic()
        running = [f for f in futures if not f.done()]
        if not running:
            return
        with self._lock:
            self._dropped.extend((now, f) for f in running)
        for fut in running:
            fut.add_done_callback(functools.partial(_returned_late, app, now))

    def running(self) -> list[tuple[float, cf.Future]]:
        """The dropped batches whose app has not returned yet (their threads keep the
        interpreter from exiting): (when dropped, future)."""
        with self._lock:
            self._dropped[:] = [(t, f) for t, f in self._dropped if not f.done()]
            return list(self._dropped)


def _returned_late(app: str, dropped_at: float, fut: cf.Future) -> None:
    log.info("a dropped batch of %s returned %.1f s after it was dropped; its result is "
             "discarded", app, time.monotonic() - dropped_at)


class Abandoner:
    """Interrupts an executor's batch once all its leases are lost; exits if it hangs on."""

    def __init__(self, client: WorkerTransport, grace_s: float, *,
                 exit: Callable[[int], None] = os._exit):
        self.client = client
        self.grace_s = grace_s
        #: batches dropped while their app ran on a task slot (the executors note them)
        self.dropped = DroppedBatches()
        self._exit = exit
        self._owns_process = False
        self._main_thread = threading.main_thread().ident or 0
        self._worker_id = ""
        self._heartbeat: Heartbeat | None = None
        #: the (executor, batch number) being abandoned
        self.target: tuple[Executor, int] | None = None

    def bind(self, worker_id: str, heartbeat: Heartbeat) -> None:
        """The worker's id and heartbeat, known once it is set up."""
        self._worker_id, self._heartbeat = worker_id, heartbeat

    def own_process(self) -> None:
        """Called in the main thread of a worker that owns its process (the CLI): SIGUSR1
        interrupts the app, and a hung app ends the process."""
        signal.signal(signal.SIGUSR1, self._on_signal)
        self._owns_process = True
        self._main_thread = threading.get_ident()

    def check(self, executor: Executor, lost: frozenset[str], reasons: Mapping[str, str]) -> None:
        """Heartbeat thread: abandon ``executor``'s running batch if every lease is lost."""
        batch = executor.batch  # one read: a consistent batch
        if batch is None or not batch.all_lost(lost):
            return
        seq = batch.seq
        if self.target == (executor, seq):
            return  # already asked
        why = ", ".join(sorted({reasons.get(t, "lost") for t in batch.task_ids}))
        log.warning("abandoning the running batch (%s): %s", why,
                    ", ".join(sorted(batch.task_ids)))
        self.target = (executor, seq)
        if not self._owns_process:
            return
        signal.pthread_kill(self._main_thread, signal.SIGUSR1)
        faulthandler.dump_traceback_later(self.grace_s + HARD_EXIT_EXTRA_S, exit=True)
        timer = threading.Timer(self.grace_s, self._exit_if_still_running, (executor, seq))
        timer.daemon = True
        timer.start()

    def done(self) -> None:
        """The main thread: the run returned, so no exit is pending."""
        if self.target is not None:
            self.target = None
            if self._owns_process:
                faulthandler.cancel_dump_traceback_later()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        target = self.target
        if target is not None and target[0].runs(target[1]):
            raise TaskAbandoned()

    def _exit_if_still_running(self, executor: Executor, seq: int) -> None:
        """The app did not return after its batch was abandoned: hand the other leases back
        and exit with EXIT_RESTART."""
        if not executor.runs(seq):
            return
        log.critical("the %s app did not stop within %.0f s of its task being abandoned; "
                     "exiting with code %d so that the supervisor starts this worker again",
                     executor.spec.name, self.grace_s, EXIT_RESTART)
        if self._heartbeat is not None:
            self._heartbeat.stop()
        try:
            released = self.client.deregister_worker(self._worker_id)
            log.info("released %d lease(s) without using an attempt", released)
        except redis.RedisError as exc:
            log.warning("could not deregister (%s); leases expire on their own", exc)
        logging.shutdown()
        self._exit(EXIT_RESTART)

    def exit_if_slots_run_on(self) -> None:
        """Shutdown, once the leases are handed back: wait for the task slots whose batch was
        dropped while their app ran until ``grace_s`` after the drop; exit with EXIT_RESTART
        if one still runs (the interpreter would wait for it forever)."""
        dropped = self.dropped.running()
        if not dropped:
            return
        if not self._owns_process:
            log.warning("%d task slot(s) still run an app whose batch was dropped; this "
                        "program exits only once they return", len(dropped))
            return
        until = max(t for t, _ in dropped) + self.grace_s
        cf.wait([f for _, f in dropped], timeout=max(0.0, until - time.monotonic()))
        left = self.dropped.running()
        if not left:
            return
        log.critical("%d task slot(s) still run an app %.0f s after their batch was dropped "
                     "(the leases are handed back); exiting with code %d so that the process "
                     "ends", len(left), self.grace_s, EXIT_RESTART)
        logging.shutdown()
        self._exit(EXIT_RESTART)
