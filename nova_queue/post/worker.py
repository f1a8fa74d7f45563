"""The post-worker: an RQ ``SimpleWorker`` (no fork per job) on the namespace's post queue,
fed by a dispatcher that follows the event stream and sweeps the ``finished`` outbox.

Without ``burst`` the dispatcher runs in a thread while RQ's worker blocks on the queue: it
waits on the namespace's event stream (``XREAD BLOCK``) and dispatches each job at its
``job_finished`` event, so artifacts appear right after a job finishes; every
``sweep_interval_s`` it also dispatches the whole outbox (jobs finished while no post-worker
ran, a dispatch that failed, events trimmed away) and moves due RQ retries into the queue.
SIGTERM or SIGINT stops it after the job in hand (RQ's warm shutdown). With ``burst`` it
sweeps, works the queue empty, and repeats while retries of this queue are still scheduled
(a failing webhook keeps a burst run alive for at most the sum of
:data:`~nova_queue.post.jobs.WEBHOOK_RETRY_INTERVALS_S`), then returns 1 if an RQ job of its
queue failed for good meanwhile, else 0.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from types import FrameType

import redis
from rq import Queue, SimpleWorker
from rq.exceptions import StopRequested
from rq.scheduler import RQScheduler

from nova_queue.post.jobs import POSTED_STATES, register_context
from nova_queue.post.queue import BUILD_FAILURE_TTL_S, dispatch, dispatch_outbox, queue_name
from nova_queue.settings import Settings

log = logging.getLogger(__name__)

#: Seconds between outbox sweeps.
SWEEP_INTERVAL_S = 5.0
#: Longest single wait of a burst run for a scheduled retry.
BURST_POLL_S = 0.5
#: Longest single XREAD BLOCK of the dispatcher (how soon it sees a stop request).
FOLLOW_BLOCK_S = 1.0
#: Events read per XREAD.
FOLLOW_BATCH = 500
#: Longest wait of RQ's command listener (its stop waits for it).
PUBSUB_WAKE_S = 1.0
#: Longest pause of the dispatcher after Redis failed.
MAX_BACKOFF_S = 30.0


class _RQWorker(SimpleWorker):
    """RQ's SimpleWorker that also tells the sweep to stop when a signal arrives, and whose
    command listener wakes every :data:`PUBSUB_WAKE_S`."""

    stop_event: threading.Event

    def request_stop(self, signum: int, frame: FrameType | None) -> None:
        self.stop_event.set()
        super().request_stop(signum, frame)

    def subscribe(self) -> None:
        """RQ's own, but for the listener's sleep (RQ's is 60 s). RQ's teardown unsubscribes,
        then joins the listener with no time limit; a listener that reads the unsubscribe
        reply before the stop flag is set goes back to wait for a subscription for its
        whole sleep, so on a busy machine a burst run hung up to 60 s after its work."""
        self.log.info("Worker %s: subscribing to channel %s", self.name,
                      self.pubsub_channel_name)
        self.pubsub = self.connection.pubsub()
        self.pubsub.subscribe(**{self.pubsub_channel_name: self.handle_payload})
        self.pubsub_thread = self.pubsub.run_in_thread(
            sleep_time=PUBSUB_WAKE_S, daemon=True,
            exception_handler=self._pubsub_exception_handler)


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
        after = self._event_mark()  # before the first sweep: no finish falls in between
        self.sweep()
        thread = threading.Thread(target=self._dispatch_loop, args=(after,),
                                  name="nova-post-dispatch", daemon=True)
        thread.start()
        try:
            self.worker.work(burst=False)
        finally:
            self.stop_event.set()
            thread.join(timeout=30)
        return 0

    def _event_mark(self) -> str | None:
        """The event stream's newest id, or None where it cannot be read (then the
        dispatcher only sweeps)."""
        try:
            return self.ctx.client.last_event_id()
        except redis.ResponseError as exc:  # e.g. an ACL user without XREVRANGE
            log.warning("cannot read the event stream (%s); sweeping the outbox every %.1f s "
                        "instead", exc, self.sweep_interval_s)
            return None

    def _dispatch_loop(self, after: str | None) -> None:
        """Dispatch at each ``job_finished`` event; sweep every ``sweep_interval_s``."""
        next_sweep = time.monotonic() + self.sweep_interval_s
        backoff = 0.5
        while not self.stop_event.is_set():
            try:
                if after is not None:
                    after = self._follow_events(after, next_sweep)
                else:
                    self.stop_event.wait(max(0.0, next_sweep - time.monotonic()))
                if time.monotonic() >= next_sweep and not self.stop_event.is_set():
                    self.sweep()
                    next_sweep = time.monotonic() + self.sweep_interval_s
                backoff = 0.5
            except Exception as exc:  # noqa: BLE001 - keep dispatching; Redis may come back
                log.warning("post-processing dispatch failed (%s); retrying in %.1f s", exc,
                            backoff)
                self.stop_event.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)

    def _follow_events(self, after: str, until: float) -> str:
        """Wait for events until ``until`` (monotonic) at most; dispatch the jobs they
        finish. Returns the id of the last event read."""
        block_s = min(FOLLOW_BLOCK_S, until - time.monotonic())
        events = self.ctx.client.events(after, count=FOLLOW_BATCH,
                                        block_ms=max(1, int(block_s * 1000)))
        for event in events:
            if event.type == "job_finished" and event.fields.get("state") in POSTED_STATES:
                dispatch(self.ctx.client, event.fields.get("job", ""), self.ctx.rq)
        return events[-1].id if events else after

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
