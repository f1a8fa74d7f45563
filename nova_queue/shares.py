"""Fair share between owners: their shares (weights) and recent usage, as the claim weighs
them (``lua/includes/owner_order.lua``).

A job's owner (``enqueue --owner``, env ``NOVA_OWNER``, default the login name) uses the
pool's worker-seconds; usage decays by half every half-life (``usage`` hash field
``half_life_s``, default 3600 s). When several owners have pending work a worker can run,
it serves the owner with the least usage per share first; within an owner, priority and
then FIFO order. An owner's **entitlement** is its share of the shares of the owners
active now.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from nova_queue.errors import InputError
from nova_queue.jobspec import NAME_RE

DEFAULT_HALF_LIFE_S = 3600.0
MAX_SHARE = 1e6


@dataclasses.dataclass(frozen=True)
class OwnerUsage:
    """One owner: its share, its usage decayed to now, and the apps it has jobs queued for."""

    owner: str
    share: float
    usage_s: float
    queued_apps: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def set_share(client, owner: str, share: float | None) -> None:
    """Give ``owner`` a share (weight; None: back to the default 1)."""
    if not isinstance(owner, str) or not NAME_RE.match(owner):
        raise InputError(f"owner {owner!r}: use 1 to 128 of A-Z a-z 0-9 _ . : @ + / -")
    if share is None:
        client.redis.hdel(client.keys.shares(), owner)
        return
    if not 0.001 <= share <= MAX_SHARE:
        raise InputError(f"a share must be from 0.001 to {MAX_SHARE:g}")
    client.redis.hset(client.keys.shares(), owner, repr(float(share)))


def set_half_life(client, seconds: float) -> None:
    """How fast usage is forgotten: it halves every ``seconds``."""
    if not 1 <= seconds <= 365 * 86400:
        raise InputError("the half-life must be from 1 s to 365 days")
    client.redis.hset(client.keys.usage(), "half_life_s", repr(float(seconds)))


def half_life_s(client) -> float:
    """The namespace's usage half-life (seconds)."""
    raw = client.redis.hget(client.keys.usage(), "half_life_s")
    try:
        value = float(raw) if raw else DEFAULT_HALF_LIFE_S
    except ValueError:
        return DEFAULT_HALF_LIFE_S
    return value if 1 <= value <= 365 * 86400 else DEFAULT_HALF_LIFE_S


def owners(client) -> list[OwnerUsage]:
    """Every owner with a share, recent usage or queued jobs, least usage per share first."""
    usage = client.redis.hgetall(client.keys.usage())
    shares = client.redis.hgetall(client.keys.shares())
    now_ms = client.server_time_ms()
    half_ms = half_life_s(client) * 1000
    queued: dict[str, list[str]] = {}
    for app in client.apps():
        for owner in client.redis.smembers(client.keys.app_owners(app)):
            queued.setdefault(owner, []).append(app)
    names = ({k[2:] for k in usage if k.startswith("u:")} | set(shares) | set(queued))
    out = []
    for name in sorted(names):
        used = _float(usage.get(f"u:{name}"), 0.0)
        since = max(now_ms - _float(usage.get(f"m:{name}"), now_ms), 0.0)
        out.append(OwnerUsage(name, _float(shares.get(name), 1.0),
                              used * 2 ** (-since / half_ms), tuple(sorted(queued.get(name, [])))))
    return sorted(out, key=lambda o: (o.usage_s / max(o.share, 1e-9), o.owner))


def _float(raw: Any, default: float) -> float:
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return default
    return value if math.isfinite(value) and abs(value) < 1e15 else default
