"""Small helpers shared by tests (no fixtures here)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], timeout_s: float = 10.0, interval_s: float = 0.02,
             message: str = "condition") -> T:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {message}")
        time.sleep(interval_s)


def expire_lease(nova, tid: str) -> None:
    """Seed state: move a lease's deadline into the past (as if its TTL ran out)."""
    nova.redis.zadd(nova.keys.leases(), {tid: 1})
    nova.redis.hset(nova.keys.task(tid), "deadline_ms", 1)


def expire_worker(nova, wid: str) -> None:
    """Seed state: the worker's heartbeat ran out."""
    nova.redis.zadd(nova.keys.alive(), {wid: 1})
    nova.redis.delete(nova.keys.heartbeat(wid))


def set_speed(nova, wid: str, app: str, s_per_cost: float, samples: int = 5) -> None:
    """Seed state: a worker's measured moving average for ``app``."""
    nova.redis.hset(nova.keys.worker(wid), mapping={f"ema:{app}": s_per_cost,
                                                    f"n:{app}": samples})
    nova.redis.zadd(nova.keys.app_fleet(app), {wid: s_per_cost})
