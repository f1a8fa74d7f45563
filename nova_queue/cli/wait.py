"""``enqueue --wait``: follow a job to its end, visibly.

In a terminal a live progress bar (with an ETA) is drawn on stderr. Piped or redirected,
a bar would stay invisible until the end, so one progress line goes to stderr at once,
then whenever the counts change (at most one per :data:`LINE_MIN_S`) and at least every
:data:`LINE_EVERY_S` while nothing changes. Either says why nothing moves when it can: no
live worker serves the job, or a worker is loading its model ("loading model on w1
(12 s)", :mod:`nova_queue.loads`). Times count from the enqueue (the job's ``created_ms``),
so the last progress line and the summary give the same figure. Ctrl-C stops the waiting,
not the job (:class:`StoppedWaiting`).
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

import click

from nova_queue.cannot_run import blocked_text
from nova_queue.cli.text import visible
from nova_queue.loads import loading_note
from nova_queue.models import JobStatus

#: Fewest seconds between two progress lines when the output is not a terminal.
LINE_MIN_S = 2.0
#: Most seconds between two progress lines when nothing changes.
LINE_EVERY_S = 10.0
#: How long one wait for new events blocks (ms).
_BLOCK_MS = 1000


class StoppedWaiting(Exception):
    """Ctrl-C while waiting: the job goes on; ``elapsed_s`` since its enqueue."""

    def __init__(self, job_id: str, elapsed_s: float):
        super().__init__(job_id)
        self.job_id, self.elapsed_s = job_id, elapsed_s


def wait_for_job(client: Any, job_id: str, *, progress: bool,
                 stream: TextIO | None = None) -> JobStatus:
    """Block until the job ends, following the event stream; show progress on ``stream``.
    StoppedWaiting on Ctrl-C."""
    stream = stream or sys.stderr
    after = client.last_event_id()
    status = client.job(job_id, with_tasks=False)
    if not progress:
        reporter: _Reporter = _Reporter(client)
    elif stream.isatty():
        reporter = _Bar(client, status.total, stream)
    else:
        reporter = _Lines(client, stream)
    try:
        while True:
            reporter.show(status)
            if status.finished:
                return status
            events = client.events(after, count=1000, block_ms=_BLOCK_MS)
            if events:
                after = events[-1].id
            status = client.job(job_id, with_tasks=False)
    except KeyboardInterrupt:
        raise StoppedWaiting(job_id, reporter.elapsed_s(status)) from None
    finally:
        reporter.close()


class _Reporter:
    """Shows nothing (``--json``); keeps the time since the enqueue."""

    def __init__(self, client: Any, clock: Any = time.monotonic):
        self.client, self.clock = client, clock
        self.started = clock()
        #: seconds from the enqueue to ``started`` (Redis's clock: the job's is Redis's)
        self.offset_s: float | None = None

    def close(self) -> None:
        """Finish the output (the bar's last line)."""

    def show(self, status: JobStatus) -> None:
        """Report ``status``."""
        self.elapsed_s(status)

    def elapsed_s(self, status: JobStatus) -> float:
        """Seconds since the job was enqueued (to its end, once it finished)."""
        if status.finished and status.finished_ms and status.created_ms:
            return max(0.0, (status.finished_ms - status.created_ms) / 1000)
        if self.offset_s is None:
            try:
                self.offset_s = max(0.0, (self.client.server_time_ms() - status.created_ms)
                                    / 1000) - (self.clock() - self.started)
            except Exception:  # noqa: BLE001 - Ctrl-C mid-call: count from the wait's start
                self.offset_s = 0.0
        return self.offset_s + self.clock() - self.started

    def note(self, status: JobStatus) -> str:
        """Why nothing moves, when it can say: no live worker for it, or a model loading."""
        if status.finished or not (status.pending or status.leased):
            return ""
        if status.pending:
            runners = self.client.who_can_run(status.app, status.requires, status.model)
            if runners.blocked and not runners.eligible:
                return visible(blocked_text(runners.blocked))
            if not runners.eligible and status.requires:
                return f"no live worker of app '{visible(status.app)}' meets its requirements"
            if not runners.eligible:
                return f"no live worker serves app '{visible(status.app)}'"
        return visible(loading_note(self.client, status.app, status.model))


class _Bar(_Reporter):
    """click's progress bar: finished tasks of all, with an ETA, and a note after it
    (terminals only)."""

    def __init__(self, client: Any, total: int, stream: TextIO):
        super().__init__(client)
        self.bar = click.progressbar(length=total, show_eta=True, show_pos=True, file=stream,
                                     item_show_func=lambda note: note)
        self.bar.__enter__()
        self.shown = 0

    def close(self) -> None:
        self.bar.__exit__(None, None, None)

    def show(self, status: JobStatus) -> None:
        note = self.note(status)
        self.bar.current_item = note or None
        if status.terminal > self.shown:
            self.bar.update(status.terminal - self.shown, note or None)
            self.shown = status.terminal
        else:
            self.bar.render_progress()


class _Lines(_Reporter):
    """One plain line per change (rate-limited) and a heartbeat line (pipes, log files)."""

    def __init__(self, client: Any, stream: TextIO, clock: Any = time.monotonic):
        super().__init__(client, clock)
        self.stream = stream
        self.last_at: float | None = None
        self.last_counts: tuple[int, ...] | None = None

    def show(self, status: JobStatus) -> None:
        counts = (status.done, status.failed, status.cancelled, status.leased, status.pending)
        now = self.clock()
        if self.last_at is not None:
            since = now - self.last_at
            changed = counts != self.last_counts
            if not ((changed and since >= LINE_MIN_S) or since >= LINE_EVERY_S
                    or (changed and status.finished)):
                return
        self.last_at, self.last_counts = now, counts
        note = self.note(status)
        click.echo(progress_line(status, self.elapsed_s(status), f"; {note}" if note else ""),
                   file=self.stream)


def seconds(status: JobStatus, elapsed_s: float) -> str:
    """The elapsed time as progress lines and the summary print it: whole seconds while
    the job runs, tenths once it finished (the summary's figure)."""
    return f"{elapsed_s:.1f} s" if status.finished else f"{elapsed_s:.0f} s"


def progress_line(status: JobStatus, elapsed_s: float, note: str = "") -> str:
    """``progress: 3/20 finished (3 done, 0 failed, 0 cancelled), 2 running, 15 pending``."""
    return (f"progress: {status.terminal}/{status.total} finished ({status.done} done, "
            f"{status.failed} failed, {status.cancelled} cancelled), {status.leased} running, "
            f"{status.pending} pending, {seconds(status, elapsed_s)}{note}")


def summary(status: JobStatus) -> str:
    """One line: state, the time since the enqueue, and counts."""
    secs = ""
    if status.created_ms and status.finished_ms:
        secs = f" in {seconds(status, (status.finished_ms - status.created_ms) / 1000)}"
    return (f"job {visible(status.job_id)} {visible(status.state)}{secs}: "
            f"{status.done} done, {status.failed} failed, {status.cancelled} cancelled of "
            f"{status.total}")


def stopped_line(stop: StoppedWaiting) -> str:
    """What Ctrl-C in ``enqueue --wait`` prints: the job goes on, and how to follow it."""
    job = visible(stop.job_id)
    return (f"stopped waiting after {stop.elapsed_s:.0f} s; job {job} keeps running — "
            f"`nova-queue status {job}`, `nova-queue cancel {job}`")
