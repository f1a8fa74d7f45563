"""Live messages built from Redis: a snapshot, then deltas from the event stream.

Protocol (the same JSON over WebSocket and over the polling fallback)::

    {"type": "snapshot", "last_id": ID, ...the full state...}
    {"type": "delta",    "last_id": ID, "events": [...], ...the state those events touched...}

``last_id`` is the newest stream id the message accounts for. A snapshot takes it *before*
reading state, so no later event is missed; deltas carry the fresh state of what an event
touched (not a diff), so applying one twice is harmless. A client that reconnects sends
its ``last_id`` as ``?after=`` and gets a delta of what it missed — or a snapshot when the
stream was trimmed past that id or it missed too much to catch up cheaply.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from nova_queue.client import NovaClient
from nova_queue.errors import JobNotFoundError
from nova_queue.models import Event, JobStatus
from nova_queue.web.present import (
    event_view,
    job_summary,
    no_worker_text,
    task_view,
    waiting_text,
)
from nova_queue.web.terms import USED_SCAN, terms_view, used_text

#: Events in a snapshot's timeline.
EVENTS_SHOWN = 200
#: Jobs in the jobs list snapshot.
JOBS_SHOWN = 50
#: A resume that misses more events than this gets a snapshot instead.
MAX_CATCH_UP = 2000
#: Tasks per gallery page.
PAGE_SIZE = 500
_ID_RE = re.compile(r"^(\d{1,20})-(\d{1,20})$")
#: Events that change which workers can run a job (a gallery re-checks its app then).
FLEET_EVENTS = frozenset({"worker_joined", "worker_left", "worker_lost"})


def parse_event_id(value: str | None) -> tuple[int, int] | None:
    """``"1700000000000-3"`` -> ``(1700000000000, 3)``; None if not a stream id."""
    m = _ID_RE.match(value or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def catch_up(client: NovaClient, after: str) -> list[Event] | None:
    """Every event after ``after``, or None when some may be lost or there are too many."""
    after_id = parse_event_id(after)
    if after_id is None:
        return None
    oldest = client.redis.xrange(client.keys.events(), "-", "+", count=1)
    if oldest and parse_event_id(oldest[0][0]) > after_id:  # type: ignore[operator]
        return None  # events between ``after`` and the oldest one were trimmed
    events = client.events(after, count=MAX_CATCH_UP + 1)
    return None if len(events) > MAX_CATCH_UP else events


def worker_names(client: NovaClient, events: Iterable[Event]) -> dict[str, str]:
    """Worker id -> name for the workers these events mention."""
    wids = sorted({e.fields["worker"] for e in events if e.fields.get("worker")})
    if not wids:
        return {}
    pipe = client.redis.pipeline(transaction=False)
    for wid in wids:
        pipe.hget(client.keys.worker(wid), "name")
    return {wid: name for wid, name in zip(wids, pipe.execute()) if name}


def event_views(client: NovaClient, events: Sequence[Event]) -> list[dict[str, Any]]:
    """Events as views with their one-line texts."""
    names = worker_names(client, events)
    return [event_view(e, names) for e in events]


class JobFeed:
    """Live state of one job's gallery page: tasks ``start`` .. ``stop - 1``."""

    def __init__(self, client: NovaClient, job_id: str, result_url: Callable[[str], str],
                 start: int = 0, stop: int | None = None):
        self.client, self.job_id, self.result_url = client, job_id, result_url
        self.start = max(0, start)
        self.stop = self.start + PAGE_SIZE if stop is None else stop

    def _tasks(self, lo: int, hi: int) -> list[dict[str, Any]]:
        return [task_view(t, self.result_url) for t in self.client.tasks(self.job_id, lo, hi)]

    def _job(self, job: JobStatus) -> dict[str, Any]:
        """The job summary plus who can run it: ``eligible_workers`` (live workers that
        can), ``cannot_run`` (live workers that could not prepare it, and why) and
        ``workers_text`` (a warning while none can and work remains)."""
        view = job_summary(job, self.client.server_time_ms())
        runners = self.client.who_can_run(job.app, job.requires, job.model)
        waiting = not job.finished and job.pending + job.leased > 0
        view.update(terms_view(job, self.client.workers(include_gone=False),
                               runners.eligible, self.client.server_time_ms()))
        view["eligible_workers"] = len(runners.eligible)
        view["cannot_run"] = [b.to_json() for b in runners.blocked]
        view["workers_text"] = ""
        if waiting and not runners.eligible and runners.blocked:
            view["workers_text"] = waiting_text(runners.blocked)
        elif waiting and not runners.eligible:
            unmet = (self.client.unmet_requirement(job.app, job.requires)
                     if job.requires and self.client.eligible_workers(job.app) else "")
            view["workers_text"] = no_worker_text(job.app, self.client.live_apps(), unmet)
        return view

    def snapshot(self) -> dict[str, Any]:
        """Everything the page shows; raises JobNotFoundError for an unknown job."""
        last_id = self.client.last_event_id()
        job = self.client.job(self.job_id, with_tasks=False)
        self.stop = min(self.stop, job.total)
        events = self.client.recent_events(EVENTS_SHOWN, job_id=self.job_id)
        view = self._job(job)
        view["used_text"] = used_text(self.client.tasks(self.job_id, 0, min(job.total, USED_SCAN)),
                                      {w.worker_id: w for w in self.client.workers()})
        return {"type": "snapshot", "last_id": last_id, "job": view,
                "window": [self.start, self.stop], "tasks": self._tasks(self.start, self.stop),
                "events": event_views(self.client, events)}

    def delta(self, events: Sequence[Event], last_id: str) -> dict[str, Any]:
        """The job's events among ``events`` and the state they touched; workers joining or
        leaving refresh the job (whether anyone can run it)."""
        mine = [e for e in events if e.fields.get("job") == self.job_id]
        msg: dict[str, Any] = {"type": "delta", "last_id": last_id, "events": [], "tasks": [],
                               "job": None}
        if not mine:
            if any(e.type in FLEET_EVENTS for e in events):
                msg["job"] = self._job(self.client.job(self.job_id, with_tasks=False))
            return msg
        job = self.client.job(self.job_id, with_tasks=False)
        self.stop = min(max(self.stop, 0), job.total)
        if any(e.type == "job_cancelled" or (e.type == "job_finished"
                                               and e.fields.get("state") == "cancelled")
               for e in mine):
            touched = list(range(self.start, self.stop))
        else:
            touched = [int(e.fields["task"]) for e in mine
                       if e.fields.get("task", "").isdigit()
                       and self.start <= int(e.fields["task"]) < self.stop]
        if touched:
            wanted = set(touched)
            msg["tasks"] = [t for t in self._tasks(min(wanted), max(wanted) + 1)
                            if t["index"] in wanted]
        msg["job"] = self._job(job)
        msg["events"] = event_views(self.client, mine)
        return msg

    def resume(self, after: str | None) -> dict[str, Any]:
        """A delta since ``after``, or a snapshot when that is impossible or not asked."""
        events = catch_up(self.client, after) if after else None
        if events is None:
            return self.snapshot()
        self.client.job(self.job_id, with_tasks=False)  # 404 for unknown jobs, as snapshot
        return self.delta(events, events[-1].id if events else after)  # type: ignore[arg-type]


class EventsFeed:
    """The namespace's timeline (optionally one job's) and the recent jobs list."""

    def __init__(self, client: NovaClient, job_id: str | None = None):
        self.client, self.job_id = client, job_id or None

    def _jobs(self, ids: Iterable[str]) -> list[dict[str, Any]]:
        now_ms = self.client.server_time_ms()
        out = []
        for job_id in ids:
            try:
                out.append(job_summary(self.client.job(job_id, with_tasks=False), now_ms))
            except JobNotFoundError:
                continue
        return out

    def snapshot(self) -> dict[str, Any]:
        """Recent events and recent jobs."""
        last_id = self.client.last_event_id()
        events = self.client.recent_events(EVENTS_SHOWN, job_id=self.job_id)
        now_ms = self.client.server_time_ms()
        jobs = [job_summary(j, now_ms) for j in self.client.jobs(JOBS_SHOWN)
                if j.state != "staging"]
        if self.job_id:
            jobs = [j for j in jobs if j["job_id"] == self.job_id]
        return {"type": "snapshot", "last_id": last_id,
                "events": event_views(self.client, events), "jobs": jobs}

    def delta(self, events: Sequence[Event], last_id: str) -> dict[str, Any]:
        """New events and the jobs they touched."""
        if self.job_id:
            events = [e for e in events if e.fields.get("job") == self.job_id]
        job_ids = list(dict.fromkeys(e.fields["job"] for e in events if e.fields.get("job")))
        return {"type": "delta", "last_id": last_id, "events": event_views(self.client, events),
                "jobs": self._jobs(job_ids)}

    def resume(self, after: str | None) -> dict[str, Any]:
        """A delta since ``after``, or a snapshot."""
        events = catch_up(self.client, after) if after else None
        if events is None:
            return self.snapshot()
        return self.delta(events, events[-1].id if events else after)  # type: ignore[arg-type]
