"""``enqueue --wait``: follow a job to its end, visibly.

In a terminal a live progress bar (with an ETA) is drawn on stderr. Piped or redirected,
a bar would stay invisible until the end, so one progress line goes to stderr at once,
then whenever the counts change (at most one per :data:`LINE_MIN_S`) and at least every
:data:`LINE_EVERY_S` while nothing changes.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

import click

from nova_queue.cannot_run import blocked_text
from nova_queue.cli.text import visible
from nova_queue.models import JobStatus

#: Fewest seconds between two progress lines when the output is not a terminal.
LINE_MIN_S = 2.0
#: Most seconds between two progress lines when nothing changes.
LINE_EVERY_S = 10.0
#: How long one wait for new events blocks (ms).
_BLOCK_MS = 1000


def wait_for_job(client: Any, job_id: str, *, progress: bool,
                 stream: TextIO | None = None) -> JobStatus:
    """Block until the job ends, following the event stream; show progress on ``stream``."""
    stream = stream or sys.stderr
    after = client.last_event_id()
    status = client.job(job_id, with_tasks=False)
    if not progress:
        reporter: _Reporter = _Reporter()
    elif stream.isatty():
        reporter = _Bar(status.total, stream)
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
    finally:
        reporter.close()


class _Reporter:
    """Shows nothing (``--json``)."""

    def close(self) -> None:
        """Finish the output (the bar's last line)."""

    def show(self, status: JobStatus) -> None:
        """Report ``status``."""


class _Bar(_Reporter):
    """click's progress bar: finished tasks of all, with an ETA (terminals only)."""

    def __init__(self, total: int, stream: TextIO):
        self.bar = click.progressbar(length=total, show_eta=True, show_pos=True, file=stream)
        self.bar.__enter__()
        self.shown = 0

    def close(self) -> None:
        self.bar.__exit__(None, None, None)

    def show(self, status: JobStatus) -> None:
        if status.terminal > self.shown:
            self.bar.update(status.terminal - self.shown)
            self.shown = status.terminal


class _Lines(_Reporter):
    """One plain line per change (rate-limited) and a heartbeat line (pipes, log files)."""

    def __init__(self, client: Any, stream: TextIO, clock: Any = time.monotonic):
        self.client, self.stream, self.clock = client, stream, clock
        self.started = clock()
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
        click.echo(progress_line(status, now - self.started, self._waiting_note(status)),
                   file=self.stream)

    def _waiting_note(self, status: JobStatus) -> str:
        if status.pending == 0 or status.finished:
            return ""
        runners = self.client.who_can_run(status.app, status.requires, status.model)
        if runners.eligible:
            return ""
        if runners.blocked:
            return f"; {visible(blocked_text(runners.blocked))}"
        if status.requires:
            return f"; no live worker of app '{visible(status.app)}' meets its requirements"
        return f"; no live worker serves app '{visible(status.app)}'"


def progress_line(status: JobStatus, elapsed_s: float, note: str = "") -> str:
    """``progress: 3/20 finished (3 done, 0 failed, 0 cancelled), 2 running, 15 pending``."""
    return (f"progress: {status.terminal}/{status.total} finished ({status.done} done, "
            f"{status.failed} failed, {status.cancelled} cancelled), {status.leased} running, "
            f"{status.pending} pending, {elapsed_s:.0f} s{note}")


def summary(status: JobStatus) -> str:
    """One line: state and counts."""
    secs = ""
    if status.started_ms and status.finished_ms:
        secs = f" in {(status.finished_ms - status.started_ms) / 1000:.1f} s"
    return (f"job {visible(status.job_id)} {visible(status.state)}{secs}: "
            f"{status.done} done, {status.failed} failed, {status.cancelled} cancelled of "
            f"{status.total}")
