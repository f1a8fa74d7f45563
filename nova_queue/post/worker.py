"""The post-worker: an RQ ``SimpleWorker`` (no fork per job) on the namespace's post queue,
plus a sweep that dispatches the ``finished`` outbox and moves due RQ retries into the queue.

Without ``burst`` the sweep runs in a thread every ``sweep_interval_s`` while RQ's worker
blocks on the queue; SIGTERM or SIGINT stops it after the job in hand (RQ's warm shutdown).
With ``burst`` it sweeps, works the queue empty, and repeats while retries of this queue are
still scheduled (a failing webhook keeps a burst run alive for at most the sum of
:data:`~nova_queue.post.WEBHOOK_RETRY_INTERVALS_S`), then returns 1 if an RQ job of its queue
failed for good meanwhile, else 0.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from types import FrameType

from rq import Queue, SimpleWorker
from rq.exceptions import StopRequested
from rq.scheduler import RQScheduler

from nova_queue.post import BUILD_FAILURE_TTL_S, dispatch_outbox, queue_name, register_context
from nova_queue.settings import Settings

log = logging.getLogger(__name__)

#: Seconds between outbox sweeps.
SWEEP_INTERVAL_S = 5.0
#: Longest single wait of a burst run for a scheduled retry.
BURST_POLL_S = 0.5


class _RQWorker(SimpleWorker):
    """RQ's SimpleWorker that also tells the sweep to stop when a signal arrives."""

    stop_event: threading.Event

    def request_stop(self, signum: int, frame: FrameType | None) -> None:
        self.stop_event.set()
        super().request_stop(signum, frame)


class PostWorker:
    """Runs one namespace's post-processing: ``run()`` returns the exit code."""

    def __init__(self, settings: Settings, *, sweep_interval_s: float = SWEEP_INTERVAL_S,
                 name: str | None = None):
        self.ctx = register_context(settings)
        self.sweep_interval_s = sweep_interval_s
        self.queue = Queue(queue_name(settings.namespace), connection=self.ctx.rq)
        self.stop_event = threading.Event()
        self.worker = _RQWorker([self.queue], connection=self.ctx.rq, name=name)
        self.worker.stop_event = self.stop_event
        self.scheduler: RQScheduler | None = None

    def sweep(self) -> int:
        """Dispatch the outbox and queue due retries; returns the builds newly queued."""
        queued = dispatch_outbox(self.ctx.client, self.ctx.rq)
        if self.scheduler is None:
            # RQ's scheduler, driven from here: its lock keeps post-workers from moving a
            # retry twice, and no scheduler process is forked
            self.scheduler = RQScheduler([self.queue], connection=self.ctx.rq)
        if self.scheduler.acquire_locks():
            self.scheduler.enqueue_scheduled_jobs()
        return queued

    def run(self, burst: bool = False) -> int:
        """Work until stopped (or, with ``burst``, until nothing is left)."""
        log.info("post-worker on queue %s (namespace %s)", self.queue.name,
                 self.ctx.settings.namespace)
        try:
            return self._run_burst() if burst else self._run_forever()
        finally:
            if self.scheduler is not None:
                try:
                    self.scheduler.release_locks()
                except Exception as exc:  # noqa: BLE001 - the lock expires on its own
                    log.debug("could not release the scheduler lock: %s", exc)

    def _run_forever(self) -> int:
        self.sweep()
        thread = threading.Thread(target=self._sweep_loop, name="nova-post-sweep", daemon=True)
        thread.start()
        try:
            self.worker.work(burst=False)
        finally:
            self.stop_event.set()
            thread.join(timeout=30)
        return 0

    def _sweep_loop(self) -> None:
        while not self.stop_event.wait(self.sweep_interval_s):
            try:
                self.sweep()
            except Exception as exc:  # noqa: BLE001 - keep sweeping; Redis may come back
                log.warning("outbox sweep failed: %s", exc)

    def _run_burst(self) -> int:
        handlers = self._install_signal_handlers()
        failed_before = self.queue.failed_job_registry.count
        try:
            while not self.stop_event.is_set():
                self.sweep()
                self.worker.work(burst=True)
                self._install_signal_handlers()  # RQ's work() installed its own
                if self.stop_event.is_set():
                    break
                wait_s = self._next_retry_in_s()
                if wait_s is None and self.queue.count == 0:
                    break
                self.stop_event.wait(min(max(wait_s or 0.0, 0.01), BURST_POLL_S))
        except StopRequested:
            pass  # a signal reached RQ's handler between two rounds
        finally:
            for sig, handler in handlers.items():
                signal.signal(sig, handler)
        failed = self.queue.failed_job_registry.count - failed_before
        if failed > 0:
            log.error("%d post-processing job(s) failed for good; see `rq info` and the log "
                      "above (builds are dispatched again after %d s)", failed,
                      BUILD_FAILURE_TTL_S)
            return 1
        return 0

    def _next_retry_in_s(self) -> float | None:
        """Seconds until this queue's next scheduled retry, or None when none is scheduled."""
        first = self.ctx.rq.zrange(self.queue.scheduled_job_registry.key, 0, 0, withscores=True)
        return max(0.0, float(first[0][1]) - time.time()) if first else None

    def _install_signal_handlers(self) -> dict[int, object]:
        if threading.current_thread() is not threading.main_thread():
            return {}
        previous = {}
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.getsignal(sig)
            signal.signal(sig, lambda signum, frame: self.stop_event.set())
        return previous
