"""Seeded Redis state for tests: put a namespace in the state under test (a lease or a
worker whose time ran out, a measured speed) instead of waiting for it."""

from __future__ import annotations


def expire_lease(nova, tid: str) -> None:
    """Seed state: move a lease's deadline into the past (as if its TTL ran out)."""
    nova.redis.zadd(nova.keys.leases(), {tid: 1})
    nova.redis.hset(nova.keys.task(tid), "deadline_ms", 1)


def expire_worker(nova, wid: str) -> None:
    """Seed state: the worker's heartbeat ran out (its score in ``alive`` is in the past)."""
    nova.redis.zadd(nova.keys.alive(), {wid: 1})


def departed_long_ago(nova, wid: str) -> None:
    """Seed state: the worker left (or was lost) longer ago than any retention."""
    nova.redis.zadd(nova.keys.departed(), {wid: 1})


def finished_long_ago(nova, job_id: str) -> None:
    """Seed state: a finished job's retention ran out (its expiry in the past)."""
    assert nova.redis.zscore(nova.keys.expiring(), job_id) is not None, "job not finished"
    nova.redis.zadd(nova.keys.expiring(), {job_id: 1})


def set_speed(nova, wid: str, app: str, s_per_cost: float, samples: int = 5) -> None:
    """Seed state: a worker's measured moving average for ``app``, and a worker that claims
    (:func:`claiming`), as one that measured its runs does."""
    nova.redis.hset(nova.keys.worker(wid), mapping={f"ema:{app}": s_per_cost,
                                                    f"n:{app}": samples})
    nova.redis.zadd(nova.keys.app_fleet(app), {wid: s_per_cost})
    claiming(nova, wid)


def claiming(nova, wid: str, ago_ms: int = 0) -> None:
    """Seed state: the worker's last claim was ``ago_ms`` ago by Redis's clock (others'
    claims count on a worker only while it claims: ``claim_ms``)."""
    seconds, micros = nova.redis.time()
    nova.redis.hset(nova.keys.worker(wid), "claim_ms", seconds * 1000 + micros // 1000 - ago_ms)


#: What a worker credential can HSET into a field that readers parse as a number or JSON:
#: infinities, NaN, overflowing and huge numbers, junk, a list, JSON nested past the parser.
FORGED_VALUES = ["inf", "-inf", "nan", "1e400", "9" * 400, "1e300", "abc", "[1]", "[" * 100_000]
#: Fields left alone by :func:`forge_fields`: what finds the record at all.
_IDENTITY_FIELDS = frozenset({"id", "state", "app", "apps"})


def forge_fields(nova, value: str, job_ids=(), worker_ids=()) -> None:
    """Seed state: every field of these jobs, all their tasks and these workers (but the
    ones that identify them) set to ``value``, plus their JSON fields, as a worker
    credential may (HSET)."""
    keys = [nova.keys.worker(w) for w in worker_ids]
    for job in job_ids:
        keys.append(nova.keys.job(job))
        keys += [nova.keys.task(t.task_id) for t in nova.tasks(job)]
    for key in keys:
        fields = set(nova.redis.hkeys(key)) - _IDENTITY_FIELDS
        fields |= {"meta", "params", "capability"}
        nova.redis.hset(key, mapping=dict.fromkeys(fields, value))
