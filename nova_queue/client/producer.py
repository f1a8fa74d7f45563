"""The producer's calls: enqueue a job (in chunks of 10,000 tasks, all or nothing), cancel it,
retry a failed task. A part of :class:`~nova_queue.client.NovaClient`; each call is one Lua
script per chunk, and an enqueue runs the retention sweep after it (``retention``)."""

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
from nova_queue.client.caller import Caller
from nova_queue.client.part import Part
from nova_queue.client.retention import Retention
from nova_queue.jobspec import job_fields
from nova_queue.keys import JOB_ID_RE, Keyspace, split_task_id
from nova_queue.limits import MAX_CHUNK, MAX_VISIT
from nova_queue.models import TaskSpec
from nova_queue.placement import Requirement
from nova_queue.settings import Settings
from nova_queue.terms import parse_deadline

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


class Producer(Part):
    """What a producer does to jobs: enqueue, cancel, retry a task."""

    def __init__(self, client: redis.Redis, keys: Keyspace, settings: Settings,
                 caller: Caller, retention: Retention):
        super().__init__(client, keys, settings, caller)
        self.retention = retention

    def enqueue(self, app: str, tasks: Sequence[TaskSpec], *,
                params: Mapping[str, Any] | None = None, priority: int = 0,
                max_attempts: int | None = None, name: str = "", job_id: str | None = None,
                timeout_s: float | None = None, requires: Sequence[str | Requirement] = (),
                owner: str | None = None, model: str = "",
                chunk_size: int = ENQUEUE_CHUNK, retention_s: int | None = None,
                deadline: Any = None, budget: float | str | None = None) -> str:
        """Create a job of ``tasks`` for ``app``; all or nothing. Returns the job id.
        ``timeout_s``: each task's run-time limit (default: derived from the claiming
        worker's prediction, ``Settings.task_timeout_floor_s`` / ``_factor``).
        ``requires``: what a worker's labels must meet (``backend=cuda,rocm``,
        ``memory_gb>=12``; ``nova_queue.placement``). ``owner``: whose share of the pool the
        job uses (default ``Settings.owner``). ``model``: what its tasks need loaded (the
        app spec's ``model_key``), so workers that have it warm take them first. Once
        finished the job stays in Redis ``retention_s`` (default
        ``settings.job_retention_s``); then the retention sweep, run here after each
        enqueue, deletes it. ``deadline`` (``"30m"``, ``"18:00"``, an ISO-8601 text, a
        ``datetime`` or a ``timedelta``) and ``budget`` (dollars): the job's terms
        (:mod:`nova_queue.terms`): the claim then prefers the cheapest workers that still
        finish it in time, and keeps its predicted spend within the budget."""
        job_id = job_id or new_job_id()
        deadline_ms = None if deadline is None else parse_deadline(deadline, self.server_time_ms(),
                                                                   "deadline")
        max_attempts = self.settings.max_attempts if max_attempts is None else max_attempts
        retention_s = self.settings.job_retention_s if retention_s is None else retention_s
        meta = json.dumps(job_fields(
            app, tasks, job_id, params=params, priority=priority, max_attempts=max_attempts,
            name=name, timeout_s=timeout_s, requires=requires,
            owner=self.settings.resolved_owner if owner is None else owner, model=model,
            retention_s=retention_s, deadline_ms=deadline_ms, budget=budget))
        k = self.keys
        keys = [k.job(job_id), k.jobs(), k.staging(), k.stage(job_id), k.pending(app), k.seq(),
                k.events(), k.apps(), k.meta()]
        created = threading.Event()  # set once a call created the job: undo it on failure
        pack = functools.partial(self._chunk_args, job_id, meta, tasks, chunk_size)
        send = functools.partial(self._send_chunk, keys, job_id, len(tasks), created)
        starts = range(0, len(tasks), chunk_size)
        try:
            send(pack(0))  # creates the job (and loads the script where it is not yet)
            pool = getattr(self.redis, "connection_pool", None)
            if len(starts) > 1 and isinstance(pool, redis.ConnectionPool):
                self._send_pipelined(pool, keys, job_id, len(tasks), pack, send, starts[1:])
            elif len(starts) > 1:  # a cluster client: one chunk per call
                self._send_chunks(pack, send, starts[1:])
        except BaseException:
            if created.is_set():
                self.abort(job_id)
            raise
        # DEBUG: callers (the CLI) print the id themselves; INFO would repeat it on every enqueue
        log.debug("enqueued job %s: %d %s tasks", job_id, len(tasks), app)
        self.retention.sweep_after_enqueue(len(tasks))
        return job_id

    def _chunk_args(self, job_id: str, meta: str, tasks: Sequence[TaskSpec], chunk_size: int,
                    start: int) -> list[Any]:
        """enqueue-9's ARGV for the chunk of ``tasks`` from ``start``: the job's fields with
        the first chunk, publish with the last; each distinct cost formatted once. Task
        pairs are encoded here, as redis-py would: this runs while Redis runs the chunk
        before, and redis-py's packing then passes bytes straight on."""
        first, last = start == 0, start + chunk_size >= len(tasks)
        args: list[Any] = [self.prefix, job_id, int(first), int(last),
                           meta if first else "", start, self.maxlen]
        encoder = self.redis.get_encoder()
        encoding, errors_ = encoder.encoding, encoder.encoding_errors
        costs: dict[float, bytes] = {}
        for spec in tasks[start:start + chunk_size]:
            cost = costs.get(spec.cost)
            if cost is None:
                cost = costs[spec.cost] = repr(float(spec.cost)).encode()
            args += [spec.input.encode(encoding, errors_), cost]
        return args

    def _send_chunk(self, keys: list[str], job_id: str, n_tasks: int,
                    created: threading.Event, args: list[Any]) -> None:
        """One enqueue-9 call; then, while it says so, calls that publish the rest."""
        res = self.caller.run("enqueue", keys, args)
        errors.raise_for_code(res[0], job_id=job_id, detail=str(res[1]))
        created.set()
        # a large job into a busy queue is published 2,000 tasks per call
        while int(res[2]) > 0:
            res = self.caller.run("enqueue", keys, [self.prefix, job_id, 0, 1, "", n_tasks,
                                                    self.maxlen])
            errors.raise_for_code(res[0], job_id=job_id, detail=str(res[1]))

    def _send_pipelined(self, pool: redis.ConnectionPool, keys: list[str], job_id: str,
                        n_tasks: int, pack: Callable[[int], list[Any]],
                        send: Callable[[list[Any]], None], starts: range) -> None:
        """The chunks after the first on one connection, each sent before the reply to the
        one before it is read: Redis finds the next chunk waiting when it ends one, and
        this thread packs the one after while Redis runs it (packed here in one thread, so
        no packing waits for the GIL). The last chunk's reply goes to ``send``'s reading
        (it may say tasks are left to publish)."""
        conn = pool.get_connection()
        sent: list[int] = []  # chunks sent whose reply is still to be read
        try:
            for start in starts:
                conn.send_packed_command(
                    self.caller.scripts.packed(conn, "enqueue", keys, pack(start)))
                sent.append(start)
                if len(sent) == 2:
                    self._chunk_reply(conn, job_id)
                    sent.pop(0)
            last = self._chunk_reply(conn, job_id)
            sent.clear()
        except BaseException:
            if sent:  # replies left unread: the connection is not fit for another call
                conn.disconnect()
            raise
        finally:
            pool.release(conn)
        if int(last[2]) > 0:  # the last chunk: tasks left to publish into a busy queue
            send([self.prefix, job_id, 0, 1, "", n_tasks, self.maxlen])

    def _chunk_reply(self, conn: Any, job_id: str) -> list[Any]:
        """The reply to the oldest pipelined chunk, read as ``caller.run`` reads one."""
        try:
            res = conn.read_response()
        except redis.ResponseError as exc:
            res = exc
        res = self.caller.answer("enqueue", res)
        errors.raise_for_code(res[0], job_id=job_id, detail=str(res[1]))
        return res

    @staticmethod
    def _send_chunks(pack: Callable[[int], list[Any]], send: Callable[[list[Any]], None],
                     starts: range) -> None:
        """Send the chunks from ``starts``, strictly in order (the script rejects any out of
        order), one call each (a cluster client: no one connection to pipeline on); pack
        the next chunk while Redis runs the one before it (one thread)."""
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

    def abort(self, job_id: str) -> None:
        """Delete a job that is still staging (an enqueue that failed part way); a failure
        here is logged: reap deletes an abandoned staging job within the hour."""
        k = self.keys
        try:
            while True:
                code, left = self.caller.run(
                    "abort", [k.job(job_id), k.staging(), k.stage(job_id), k.meta()],
                    [self.prefix, job_id, MAX_VISIT])
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
            raise self.retention.missing_job(job_id)
        k = self.keys
        cursor = "0"
        while cursor != "-1":
            code, nxt = self.caller.run(
                "cancel", [k.job(job_id), k.pending(app), k.finished(), k.events(), k.meta()],
                [self.prefix, job_id, cursor, MAX_VISIT, self.maxlen])
            errors.raise_for_code(code, job_id=job_id, detail=f"cannot cancel job {job_id}: {nxt}")
            cursor = str(nxt)

    def retry(self, tid: str) -> None:
        """Put a failed task back in the queue with fresh attempts."""
        job_id, _ = split_task_id(tid)
        app = self.redis.hget(self.keys.job(job_id), "app")
        if app is None:
            raise errors.TaskNotFoundError(f"unknown task {tid}")
        k = self.keys
        res = self.caller.run(
            "retry", [k.task(tid), k.job(job_id), k.pending(app), k.failed(), k.finished(),
                      k.events(), k.meta()],
            [self.prefix, tid, self.maxlen])
        errors.raise_for_code(int(res[0]), task_id=tid, detail=str(res[1]) if len(res) > 1 else "")
