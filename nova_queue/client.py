"""The typed client: enqueue, cancel, retry, and reading jobs, tasks, workers and events.
The fenced worker calls (claim / renew / complete / fail, ...) are mixed in from
:mod:`nova_queue.worker_calls`. Every state change is one Lua script."""

from __future__ import annotations

import functools
import json
import logging
import secrets
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from typing import Any

import redis

from nova_queue import errors
from nova_queue.batch_calls import BatchCalls
from nova_queue.connection import connect
from nova_queue.events import entry_events
from nova_queue.jobspec import job_fields
from nova_queue.keys import JOB_ID_RE, Keyspace, split_task_id, task_id
from nova_queue.limits import MAX_CHUNK, MAX_VISIT
from nova_queue.models import (
    Event,
    JobStatus,
    TaskInfo,
    TaskSpec,
    int_field,
)
from nova_queue.placement import Requirement
from nova_queue.retention import RetentionCalls
from nova_queue.scripts import Scripts
from nova_queue.settings import Settings
from nova_queue.worker_info import WorkerInfo

log = logging.getLogger(__name__)

#: Tasks per enqueue call; larger jobs are staged chunk by chunk and published at once.
ENQUEUE_CHUNK = MAX_CHUNK
_CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"


def new_job_id() -> str:
    """A job id that sorts by creation time: 10 chars of ms timestamp + 6 random."""
    ms = int(time.time() * 1000)
    stamp = "".join(_CROCKFORD[(ms >> (5 * i)) & 31] for i in reversed(range(10)))
    rand = "".join(secrets.choice(_CROCKFORD) for _ in range(6))
    return stamp + rand


class NovaClient(BatchCalls, RetentionCalls):
    """One namespace of one Redis; thread-safe (redis-py pools connections)."""

    def __init__(self, client: redis.Redis, *, settings: Settings | None = None,
                 namespace: str | None = None):
        self.settings = settings or Settings()
        if namespace is not None and namespace != self.settings.namespace:
            self.settings = Settings(**{**self.settings.__dict__, "namespace": namespace})
        self.redis = client
        self.keys = Keyspace(self.settings.namespace)
        self.prefix = self.keys.prefix
        self.scripts = Scripts(client)
        #: key lists of the hot worker calls, per (call, worker, app): built once
        self._key_lists: dict[tuple[str, str, str], list[str]] = {}

    @classmethod
    def from_settings(cls, settings: Settings) -> NovaClient:
        """Connect to ``settings.redis_url``."""
        return cls(connect(settings.redis_url), settings=settings)

    @classmethod
    def from_url(cls, url: str, namespace: str = "default", **settings: Any) -> NovaClient:
        """Connect to ``url`` with default settings."""
        s = Settings(redis_url=url, namespace=namespace, **settings)
        return cls(connect(url), settings=s)

    def close(self) -> None:
        """Close the connection pool."""
        self.redis.close()

    # ---- internals --------------------------------------------------------------------
    @property
    def _maxlen(self) -> int:
        return self.settings.events_maxlen

    def _call(self, name: str, keys: list[str], args: list[Any]) -> list[Any]:
        try:
            res = self.scripts.call(name, keys, args)
        except redis.ResponseError as exc:
            mismatch = errors.protocol_error(exc, self.settings.namespace)
            if mismatch is None:
                raise
            raise mismatch from None  # the script refused the namespace's protocol
        if res and res[0] == errors.BAD_INPUT:  # every script answers {-9, message}
            raise errors.InputError(f"{name}: {res[1] if len(res) > 1 else 'invalid input'}")
        return res

    # ---- producer side ----------------------------------------------------------------
    def enqueue(self, app: str, tasks: Sequence[TaskSpec], *,
                params: Mapping[str, Any] | None = None, priority: int = 0,
                max_attempts: int | None = None, name: str = "", job_id: str | None = None,
                timeout_s: float | None = None, requires: Sequence[str | Requirement] = (),
                owner: str | None = None, model: str = "",
                chunk_size: int = ENQUEUE_CHUNK, retention_s: int | None = None) -> str:
        """Create a job of ``tasks`` for ``app``; all or nothing. Returns the job id.
        ``timeout_s``: each task's run-time limit (default: derived from the claiming
        worker's prediction, ``Settings.task_timeout_floor_s`` / ``_factor``).
        ``requires``: what a worker's labels must meet (``backend=cuda,rocm``,
        ``memory_gb>=12``; ``nova_queue.placement``). ``owner``: whose share of the pool the
        job uses (default ``Settings.owner``). ``model``: what its tasks need loaded (the
        app spec's ``model_key``), so workers that have it warm take them first. Once
        finished the job stays in Redis ``retention_s`` (default
        ``settings.job_retention_s``); then the retention sweep, run here after each
        enqueue, deletes it."""
        job_id = job_id or new_job_id()
        max_attempts = self.settings.max_attempts if max_attempts is None else max_attempts
        retention_s = self.settings.job_retention_s if retention_s is None else retention_s
        meta = json.dumps(job_fields(
            app, tasks, job_id, params=params, priority=priority, max_attempts=max_attempts,
            name=name, timeout_s=timeout_s, requires=requires,
            owner=self.settings.resolved_owner if owner is None else owner, model=model,
            retention_s=retention_s))
        k = self.keys
        keys = [k.job(job_id), k.jobs(), k.staging(), k.stage(job_id), k.pending(app), k.seq(),
                k.events(), k.apps(), k.meta()]
        created = threading.Event()  # set once a call created the job: undo it on failure
        try:
            self._send_chunks(
                functools.partial(self._chunk_args, job_id, meta, tasks, chunk_size),
                functools.partial(self._send_chunk, keys, job_id, len(tasks), created),
                range(0, len(tasks), chunk_size))
        except BaseException:
            if created.is_set():
                self._abort(job_id)
            raise
        # DEBUG: callers (the CLI) print the id themselves; INFO would repeat it on every enqueue
        log.debug("enqueued job %s: %d %s tasks", job_id, len(tasks), app)
        self.sweep_after_enqueue(len(tasks))
        return job_id

    def _chunk_args(self, job_id: str, meta: str, tasks: Sequence[TaskSpec], chunk_size: int,
                    start: int) -> list[Any]:
        """enqueue-9's ARGV for the chunk of ``tasks`` from ``start``: the job's fields with
        the first chunk, publish with the last; each distinct cost formatted once."""
        first, last = start == 0, start + chunk_size >= len(tasks)
        args: list[Any] = [self.prefix, job_id, int(first), int(last),
                           meta if first else "", start, self._maxlen]
        costs: dict[float, str] = {}
        for spec in tasks[start:start + chunk_size]:
            cost = costs.get(spec.cost)
            if cost is None:
                cost = costs[spec.cost] = repr(float(spec.cost))
            args += [spec.input, cost]
        return args

    def _send_chunk(self, keys: list[str], job_id: str, n_tasks: int,
                    created: threading.Event, args: list[Any]) -> None:
        """One enqueue-9 call; then, while it says so, calls that publish the rest."""
        res = self._call("enqueue", keys, args)
        errors.raise_for_code(res[0], job_id=job_id, detail=str(res[1]))
        created.set()
        # a large job into a busy queue is published 2,000 tasks per call
        while int(res[2]) > 0:
            res = self._call("enqueue", keys, [self.prefix, job_id, 0, 1, "", n_tasks,
                                               self._maxlen])
            errors.raise_for_code(res[0], job_id=job_id, detail=str(res[1]))

    @staticmethod
    def _send_chunks(pack: Callable[[int], list[Any]], send: Callable[[list[Any]], None],
                     starts: range) -> None:
        """Send every chunk, strictly in order (the script rejects any out of order); for a
        large job, pack the next chunk while Redis runs the one before it (one thread)."""
        if len(starts) == 1:
            send(pack(0))
            return
        inflight: Future[None] | None = None
        try:
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="nova-enqueue") as pool:
                for start in starts:
                    args = pack(start)
                    if inflight is not None:
                        inflight.result()
                    inflight = pool.submit(send, args)
                inflight.result()
        except BaseException:
            if inflight is not None:
                futures_wait([inflight])  # `created` is final once no chunk is in flight
            raise

    def _abort(self, job_id: str) -> None:
        k = self.keys
        try:
            while True:
                code, left = self._call("abort", [k.job(job_id), k.staging(), k.stage(job_id),
                                                  k.meta()], [self.prefix, job_id, MAX_VISIT])
                if code != 0 or int(left) == 0:
                    return
        except redis.RedisError:
            log.warning("could not abort staged job %s; reap removes it within the hour", job_id)

    def cancel(self, job_id: str) -> None:
        """Cancel a job: pending tasks are cancelled, in-flight results will be rejected.
        Each call of the script visits at most 2,000 of the job's pending tasks."""
        if not JOB_ID_RE.match(job_id):
            raise errors.JobNotFoundError(f"unknown job {job_id!r}")
        app = self.redis.hget(self.keys.job(job_id), "app")
        if app is None:
            raise self.missing_job(job_id)
        k = self.keys
        cursor = "0"
        while cursor != "-1":
            code, nxt = self._call(
                "cancel", [k.job(job_id), k.pending(app), k.finished(), k.events(), k.meta()],
                [self.prefix, job_id, cursor, MAX_VISIT, self._maxlen])
            errors.raise_for_code(code, job_id=job_id, detail=f"cannot cancel job {job_id}: {nxt}")
            cursor = str(nxt)

    def retry(self, tid: str) -> None:
        """Put a failed task back in the queue with fresh attempts."""
        job_id, _ = split_task_id(tid)
        app = self.redis.hget(self.keys.job(job_id), "app")
        if app is None:
            raise errors.TaskNotFoundError(f"unknown task {tid}")
        k = self.keys
        res = self._call("retry", [k.task(tid), k.job(job_id), k.pending(app), k.failed(),
                                   k.finished(), k.events(), k.meta()],
                         [self.prefix, tid, self._maxlen])
        errors.raise_for_code(int(res[0]), task_id=tid, detail=str(res[1]) if len(res) > 1 else "")

    # ---- reading ----------------------------------------------------------------------
    def job(self, job_id: str, *, with_tasks: bool = True) -> JobStatus:
        """A job's counters and (by default) all its tasks."""
        h = self.redis.hgetall(self.keys.job(job_id))
        if not h or h.get("state") in ("staging", "expired"):
            raise self.missing_job(job_id)
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
            why = self.tombstone(split_task_id(tid)[0]) if ":" in tid else None
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

    def workers(self, *, include_gone: bool = True, limit: int = 1000) -> list[WorkerInfo]:
        """Registered workers, live ones first."""
        ids = self.redis.zrevrange(self.keys.workers(), 0, limit - 1)
        alive_scores = dict(self.redis.zrange(self.keys.alive(), 0, -1, withscores=True))
        now_ms = self.server_time_ms()
        pipe = self.redis.pipeline(transaction=False)
        for wid in ids:
            pipe.hgetall(self.keys.worker(wid))
            pipe.smembers(self.keys.held(wid))
        res = pipe.execute()
        out = []
        for i, wid in enumerate(ids):
            h, held = res[2 * i], res[2 * i + 1]
            if not h:
                continue
            alive = wid in alive_scores
            if not alive and not include_gone:
                continue
            out.append(WorkerInfo.from_hash(h, alive=alive, current=sorted(held), now_ms=now_ms))
        out.sort(key=lambda w: (not w.alive, w.host_id, w.name))
        return out

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

    def server_time_ms(self) -> int:
        """Redis's clock in ms (the only clock leases use)."""
        sec, usec = self.redis.time()
        return int(sec) * 1000 + int(usec) // 1000
