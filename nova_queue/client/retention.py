"""Retention: what keeps Redis from growing without end in a pool that runs for months.

A finished (done or cancelled) job stays in Redis for its retention (``retention_s``, from
``enqueue --retention`` or ``NOVA_JOB_RETENTION_S``, 7 days by default); then the retention
sweep (``lua/expire-10.lua``) deletes it with its tasks and index entries, and forgets the
workers that left or were lost as long ago. The client runs the sweep after each enqueue,
deleting at least twice what it added (an admin call: it needs ``DEL``, which the worker role
lacks), so no coordinator process is needed. ``purge`` deletes one finished job now. Results
in the store are the product: they stay, unless :func:`delete_results` is asked to delete
them. A deleted job leaves a tombstone (``expired``), so readers say "expired" (or
"purged") rather than "unknown": :meth:`Retention.missing_job` is the error every reader of a
job raises. A part of :class:`~nova_queue.client.NovaClient`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

import redis

from nova_queue import errors
from nova_queue.client.part import Part
from nova_queue.keys import JOB_ID_RE
from nova_queue.limits import MAX_VISIT

if TYPE_CHECKING:
    from nova_queue.stores import ResultStore

log = logging.getLogger(__name__)

#: Work units the sweep does after an enqueue besides twice the tasks enqueued (a task hash
#: deleted is 1 unit, the rest of a job 8, a worker 4).
SWEEP_MARGIN = 64
#: A purged job's tombstone score is the Redis ms it was purged plus this (common.lua's
#: PURGED_MARK); a job whose retention ran out has a whole number.
PURGED_MARK = 0.5


class Retention(Part):
    """The retention sweep, purge, and what a deleted job left behind (its tombstone)."""

    def expire(self, budget: int = MAX_VISIT) -> dict[str, int]:
        """One call of the retention sweep (``budget`` work units, 1..2000): ``jobs``
        expired, ``tasks`` deleted, ``workers`` forgotten, ``more`` (1: call again)."""
        k = self.keys
        res = self.caller.run(
            "expire", [k.expiring(), k.departed(), k.expired(), k.jobs(), k.finished(),
                       k.failed(), k.workers(), k.alive(), k.meta(), k.events()],
            [self.prefix, budget, self.settings.job_retention_s, self.maxlen])
        return {"jobs": int(res[1]), "tasks": int(res[2]), "workers": int(res[3]),
                "more": int(res[4])}

    def sweep(self, units: int) -> dict[str, int]:
        """Run the sweep until it spent ``units`` work units or nothing more is due, in calls
        of at most 2,000 units; returns the totals."""
        total = {"jobs": 0, "tasks": 0, "workers": 0}
        while units > 0:
            got = self.expire(min(MAX_VISIT, units))
            for name in total:
                total[name] += got[name]
            units -= MAX_VISIT
            if not got["more"]:
                break
        return total

    def sweep_after_enqueue(self, n_tasks: int) -> None:
        """After enqueueing ``n_tasks``: delete at least as much as that added, so Redis holds
        no more than the retention window. The job is enqueued: a failure here is logged."""
        try:
            done = self.sweep(2 * n_tasks + SWEEP_MARGIN)
        except (redis.RedisError, errors.NovaError) as exc:
            log.warning("retention sweep skipped: %s", exc)
            return
        if any(done.values()):
            log.debug("retention: %(jobs)d jobs (%(tasks)d tasks) expired, %(workers)d workers "
                      "forgotten", done)

    def purge(self, job_id: str) -> int:
        """Delete a finished job's Redis data now (tasks, index entries; a tombstone stays);
        returns the tasks deleted. Raises JobNotFoundError (JobExpiredError when it is gone
        already) or InvalidStateError when the job has not finished."""
        if not isinstance(job_id, str) or not JOB_ID_RE.match(job_id):
            raise errors.JobNotFoundError(f"unknown job {job_id!r}")
        k = self.keys
        keys = [k.job(job_id), k.expiring(), k.expired(), k.jobs(), k.finished(), k.failed(),
                k.meta(), k.events()]
        deleted, left = 0, 1
        while left:
            res = self.caller.run("purge", keys, [self.prefix, job_id, MAX_VISIT, self.maxlen])
            if res[0] == errors.UNKNOWN_JOB:
                raise self.missing_job(job_id)
            if res[0] == errors.BAD_STATE:
                raise errors.InvalidStateError(f"job {job_id} is {res[1]}: only a finished job "
                                               "is purged (cancel it first)")
            deleted, left = deleted + int(res[1]), int(res[2])
        return deleted

    def finished_before(self, cutoff_ms: int, page: int = 1000) -> Iterator[str]:
        """Ids of the finished jobs (still in Redis) that finished before ``cutoff_ms``."""
        key, start = self.keys.expiring(), 0
        while True:
            ids = self.redis.zrange(key, start, start + page - 1)
            if not ids:
                return
            pipe = self.redis.pipeline(transaction=False)
            for job_id in ids:
                pipe.hget(self.keys.job(job_id), "finished_ms")
            for job_id, finished in zip(ids, pipe.execute()):
                try:
                    if finished is not None and int(finished) < cutoff_ms:
                        yield job_id
                except ValueError:
                    continue  # a forged field: not a time
            start += page

    def is_expired(self, job_id: str) -> bool:
        """Whether the job's Redis data expired or was purged (or is being deleted)."""
        return self.tombstone(job_id) is not None

    def tombstone(self, job_id: str) -> str | None:
        """``"purged"`` (``nova-queue purge``), ``"expired"`` (its retention ran out, or it
        is being deleted) or None (not deleted, or never known). ZMSCORE and HGET: commands
        of the read-only gallery role (docs/SECURITY.md)."""
        score = self.redis.zmscore(self.keys.expired(), [job_id])[0]
        if score is not None:
            return "purged" if score % 1 == PURGED_MARK else "expired"
        return "expired" if self.redis.hget(self.keys.job(job_id), "state") == "expired" \
            else None

    def missing_job(self, job_id: str) -> errors.JobNotFoundError:
        """The error for a job that cannot be read: purged, expired, or unknown."""
        why = self.tombstone(job_id)
        if why == "purged":
            return errors.JobExpiredError(
                f"job {job_id} was purged ('nova-queue purge'): its Redis data is deleted; "
                "its results stay in the store unless they were purged too")
        if why == "expired":
            return errors.JobExpiredError(
                f"job {job_id} expired: finished jobs leave Redis after their retention "
                "(NOVA_JOB_RETENTION_S, enqueue --retention); its results stay in the store "
                "unless they were purged")
        return errors.JobNotFoundError(f"unknown job {job_id}")


def delete_results(store: ResultStore, job_id: str) -> int:
    """Delete every object of a job in the result store (``jobs/<job>/``: its results and
    artifacts); returns how many. Works whether or not the job is still in Redis."""
    if not JOB_ID_RE.match(job_id):
        raise errors.InputError(f"invalid job id {job_id!r}")
    n = 0
    for key in list(store.list(f"jobs/{job_id}/")):
        store.delete(key)
        n += 1
    return n
