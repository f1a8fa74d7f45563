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


def set_speed(nova, wid: str, app: str, s_per_cost: float, samples: int = 5) -> None:
    """Seed state: a worker's measured moving average for ``app``."""
    nova.redis.hset(nova.keys.worker(wid), mapping={f"ema:{app}": s_per_cost,
                                                    f"n:{app}": samples})
    nova.redis.zadd(nova.keys.app_fleet(app), {wid: s_per_cost})
