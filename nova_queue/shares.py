"""Fair share between owners: their shares (weights) and recent usage, as the claim weighs
them (``lua/includes/owner_order.lua``).

A job's owner (``enqueue --owner``, env ``NOVA_OWNER``, default the login name) uses the
pool's worker-seconds; usage decays by half every half-life (``usage`` hash field
``half_life_s``, default 3600 s), kept per owner as one forward-decayed field in the log
domain (``f:<owner>``, see ``lua/includes/note_usage.lua``). When several owners have pending work a worker can run,
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
MAX_HALF_LIFE_S = 365 * 86400  # common.lua's MAX_HALF_LIFE_S
#: Jobs of one owner and app whose states ``owners`` reads (newest first).
MAX_JOBS_LOOKED_AT = 500
#: A job in these states (or gone: None) has nothing queued.
FINISHED_STATES = frozenset({"done", "cancelled", "expired", None})


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
    """How fast usage is forgotten: it halves every ``seconds``. Usage is kept as forward
    decay (``note_usage.lua``: field ``f:<owner>`` = log2 of the charges weighted by
    2^phi(t), phi(t) = t_ms / half_ms + ``phase``), so the new half-life moves ``phase``
    to keep phi(now) as it is: every owner's usage now stays, and decays at the new rate."""
    if not 1 <= seconds <= MAX_HALF_LIFE_S:
        raise InputError("the half-life must be from 1 s to 365 days")

    def update(pipe: Any) -> None:
        old, phase = pipe.hmget(client.keys.usage(), "half_life_s", "phase")
        now_ms = client.server_time_ms()
        phi = now_ms / (_half_life(old) * 1000) + _phase(phase)
        pipe.multi()
        pipe.hset(client.keys.usage(), mapping={"half_life_s": repr(float(seconds)),
                                                "phase": repr(phi - now_ms / (seconds * 1000))})

    client.redis.transaction(update, client.keys.usage())


def half_life_s(client) -> float:
    """The namespace's usage half-life (seconds)."""
    return _half_life(client.redis.hget(client.keys.usage(), "half_life_s"))


def _half_life(raw: Any) -> float:
    try:
        value = float(raw) if raw else DEFAULT_HALF_LIFE_S
    except ValueError:
        return DEFAULT_HALF_LIFE_S
    return value if 1 <= value <= MAX_HALF_LIFE_S else DEFAULT_HALF_LIFE_S


def owners(client) -> list[OwnerUsage]:
    """Every owner with a share, recent usage or a queue, least usage per share first; its
    queued apps are those it has a job of that has not finished (:func:`has_queued_job`)."""
    usage = client.redis.hgetall(client.keys.usage())
    shares = client.redis.hgetall(client.keys.shares())
    now_ms = client.server_time_ms()
    phi = now_ms / (_half_life(usage.get("half_life_s")) * 1000) + _phase(usage.get("phase"))
    queued: dict[str, list[str]] = {}
    for app in client.apps():
        for owner in client.redis.smembers(client.keys.app_owners(app)):
            if has_queued_job(client, app, owner):
                queued.setdefault(owner, []).append(app)
    names = ({k[2:] for k in usage if k.startswith("f:")} | set(shares) | set(queued))
    out = []
    for name in sorted(names):
        out.append(OwnerUsage(name, _float(shares.get(name), 1.0),
                              usage_now(usage.get(f"f:{name}"), phi),
                              tuple(sorted(queued.get(name, [])))))
    return sorted(out, key=lambda o: (o.usage_s / max(o.share, 1e-9), o.owner))


def has_queued_job(client, app: str, owner: str) -> bool:
    """Whether ``owner`` has a job of ``app`` that has not finished. Its queue
    (``app:<app>:owner:<owner>``) keeps a finished job until the retention sweep (with one
    owner no claim drops it), so the jobs' states decide: the newest
    :data:`MAX_JOBS_LOOKED_AT` of them; past that many finished ones it counts as queued
    (never hiding work)."""
    key = client.keys.app_owner_queue(app, owner)
    ids = client.redis.zrevrange(key, 0, MAX_JOBS_LOOKED_AT - 1)
    if not ids:
        return False
    pipe = client.redis.pipeline(transaction=False)
    for job_id in ids:
        pipe.hget(client.keys.job(job_id), "state")
    if any(state not in FINISHED_STATES for state in pipe.execute()):
        return True
    return len(ids) == MAX_JOBS_LOOKED_AT and client.redis.zcard(key) > MAX_JOBS_LOOKED_AT


def usage_now(field: Any, phi: float) -> float:
    """Worker-seconds an owner's usage field ``f:<owner>`` stands for at phi(now) (0 when
    unset or malformed; at most 1e15, as the claim caps it)."""
    try:
        f = float(field)
    except (TypeError, ValueError):
        return 0.0
    if math.isnan(f):
        return 0.0
    return 2 ** min(f - phi, math.log2(1e15))


def _phase(raw: Any) -> float:
    """The usage hash's ``phase`` as usage_phase.lua reads it (0 unless within ±1e12)."""
    value = _float(raw, 0.0)
    return value if abs(value) <= 1e12 else 0.0


def _float(raw: Any, default: float) -> float:
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return default
    return value if math.isfinite(value) and abs(value) < 1e15 else default
