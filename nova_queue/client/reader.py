"""Reading a namespace: jobs, their tasks, failed tasks, pending counts, apps and the event
stream. A part of :class:`~nova_queue.client.NovaClient`; plain commands, nothing written
(the commands of the read-only gallery role, docs/SECURITY.md). A job that cannot be read
is explained by its tombstone (``retention``): expired, purged or unknown."""

from __future__ import annotations

import redis

from nova_queue import errors
from nova_queue.client.caller import Caller
from nova_queue.client.part import Part
from nova_queue.client.retention import Retention
from nova_queue.events import entry_events
from nova_queue.keys import Keyspace, split_task_id, task_id
from nova_queue.models import Event, JobStatus, TaskInfo, int_field
from nova_queue.settings import Settings


class Reader(Part):
    """Reads of jobs, tasks and events."""

    def __init__(self, client: redis.Redis, keys: Keyspace, settings: Settings,
                 caller: Caller, retention: Retention):
        super().__init__(client, keys, settings, caller)
        self.retention = retention

    def job(self, job_id: str, *, with_tasks: bool = True) -> JobStatus:
        """A job's counters and (by default) all its tasks."""
        h = self.redis.hgetall(self.keys.job(job_id))
        if not h or h.get("state") in ("staging", "expired"):
            raise self.retention.missing_job(job_id)
        tasks = self.tasks(job_id, 0, int_field(h.get("total"))) if with_tasks else []
        return JobStatus.from_hash(h, tasks)

    def staging_job(self, job_id: str) -> JobStatus | None:
        """A job still being enqueued (or abandoned mid-way by a killed producer), without
        tasks; ``staged`` says how many are written. None if there is no such staging job.

        :meth:`job` does not show these: claims, the gallery and post-processing must not."""
        h = self.redis.hgetall(self.keys.job(job_id))
        if not h or h.get("state") != "staging":
            return None
        return JobStatus.from_hash(h, [])

    def tasks(self, job_id: str, start: int = 0, stop: int | None = None) -> list[TaskInfo]:
        """Tasks ``start`` .. ``stop - 1`` of a job, up to the first missing one: a job's
        tasks are 0 .. total-1 without gaps, and ``total`` is a writable field, so neither it
        nor task hashes planted far apart decide how long this reads."""
        if stop is None:
            stop = int_field(self.redis.hget(self.keys.job(job_id), "total"))
        out: list[TaskInfo] = []
        for lo in range(start, stop, 1000):
            ids = [task_id(job_id, i) for i in range(lo, min(lo + 1000, stop))]
            pipe = self.redis.pipeline(transaction=False)
            for tid in ids:
                pipe.hgetall(self.keys.task(tid))
            for tid, h in zip(ids, pipe.execute()):
                if not h:
                    return out
                out.append(TaskInfo.from_hash(tid, h))
        return out

    def task(self, tid: str) -> TaskInfo:
        """One task."""
        h = self.redis.hgetall(self.keys.task(tid))
        if not h:
            why = self.retention.tombstone(split_task_id(tid)[0]) if ":" in tid else None
            raise errors.TaskNotFoundError(f"unknown task {tid}" + (f": its job {why}"
                                                                    if why else ""))
        return TaskInfo.from_hash(tid, h)

    def jobs(self, limit: int = 50) -> list[JobStatus]:
        """The most recent jobs, newest first, without their tasks."""
        ids = self.redis.zrevrange(self.keys.jobs(), 0, limit - 1)
        pipe = self.redis.pipeline(transaction=False)
        for job_id in ids:
            pipe.hgetall(self.keys.job(job_id))
        return [JobStatus.from_hash(h, []) for h in pipe.execute() if h]

    def failed_tasks(self, limit: int = 100) -> list[TaskInfo]:
        """Tasks that failed for good, most recent first."""
        ids = self.redis.zrevrange(self.keys.failed(), 0, limit - 1)
        pipe = self.redis.pipeline(transaction=False)
        for tid in ids:
            pipe.hgetall(self.keys.task(tid))
        return [TaskInfo.from_hash(t, h) for t, h in zip(ids, pipe.execute())
                if h and h.get("state") == "failed"]

    def pending_count(self, app: str) -> int:
        """Tasks of ``app`` waiting for a worker."""
        return int(self.redis.zcard(self.keys.pending(app)))

    def apps(self) -> list[str]:
        """Every app that ever had a job in this namespace."""
        return sorted(self.redis.smembers(self.keys.apps()))

    def events(self, after: str = "0-0", *, count: int = 500,
               block_ms: int | None = None) -> list[Event]:
        """Events after id ``after`` (``"$"``: only new ones), oldest first: those of up to
        ``count`` stream entries (a packed entry holds up to 64, nova_queue/events.py)."""
        if block_ms is None:
            rows = self.redis.xrange(self.keys.events(), f"({after}" if after != "0-0" else "-",
                                     "+", count=count) if after != "$" else []
        else:
            res = self.redis.xread({self.keys.events(): after}, count=count, block=block_ms)
            rows = res[0][1] if res else []
        return [e for eid, f in rows for e in entry_events(eid, f)]

    def recent_events(self, count: int = 200, *, job_id: str | None = None) -> list[Event]:
        """The newest ``count`` events (of one job if given), oldest first."""
        rows = self.redis.xrevrange(self.keys.events(), "+", "-",
                                    count=count if job_id is None else count * 20)
        evs = [e for eid, f in reversed(rows) for e in entry_events(eid, f)
               if job_id is None or e.fields.get("job") == job_id]
        return evs[-count:] if count > 0 else []

    def last_event_id(self) -> str:
        """Id of the newest event, or ``0-0``."""
        rows = self.redis.xrevrange(self.keys.events(), "+", "-", count=1)
        return rows[0][0] if rows else "0-0"
