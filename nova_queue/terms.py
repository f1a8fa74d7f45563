"""Money and time: a worker's price, a job's deadline and budget, checked before anything
is sent.

A worker's price is dollars per hour of its time (``worker --cost-per-hour``, env
``NOVA_COST_PER_HOUR``; a gateway worker's comes from its token, set by the operator). A job
may carry a deadline (``enqueue --deadline 30m|18:00|ISO-8601``) and a budget in dollars
(``--budget 5.00``): the claim then prefers the cheapest workers that still finish it in
time (``lua/includes/deadline_grant.lua``) and never lets its predicted spend pass the
budget (``lua/includes/budget_grant.lua``). The scripts check the same bounds again
(``MAX_PRICE``, ``MAX_BUDGET``, ``MAX_DEADLINE_MS`` in ``lua/includes/common.lua``).
"""

from __future__ import annotations

import datetime
import math
import re
from typing import Any

from nova_queue.errors import InputError
from nova_queue.limits import MAX_BUDGET, MAX_DEADLINE_MS, MAX_PRICE

_AHEAD_RE = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhd])\Z")
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_CLOCK_RE = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)(?::([0-5]\d))?\Z")


def _money(value: Any, source: str, most: float) -> float:
    if isinstance(value, bool):
        raise InputError(f"{source} {value!r}: expected a number of dollars")
    try:
        number = float(str(value).strip().lstrip("$")) if isinstance(value, str) else float(value)
    except (TypeError, ValueError):
        raise InputError(f"{source} {value!r}: expected a number of dollars "
                         "(e.g. 2.50)") from None
    if not math.isfinite(number) or not 0 <= number <= most:
        raise InputError(f"{source} {value!r}: expected a number of dollars from 0 to {most:g}")
    return number


def parse_price(value: Any, source: str = "--cost-per-hour") -> float:
    """A price in dollars per hour: a number from 0 to MAX_PRICE (``2.50``, ``"$2.50"``)."""
    return _money(value, source, MAX_PRICE)


def price_field(raw: Any) -> float:
    """A stored price (a worker's ``price``, a token's ``cost_per_hour``): anything but a
    number from 0 to MAX_PRICE (a field written by hand) reads as 0."""
    try:
        return parse_price(raw or 0, "price")
    except InputError:
        return 0.0


def parse_budget(value: Any, source: str = "--budget") -> float:
    """A job's budget in dollars: a number from 0 to MAX_BUDGET."""
    return _money(value, source, MAX_BUDGET)


def parse_deadline(value: Any, now_ms: int, source: str = "--deadline") -> int:
    """A deadline as epoch ms: a duration from now (``30m``, ``2h``, ``90s``, ``1.5d``), a
    clock time (``18:00``: its next occurrence, local time), an ISO-8601 instant
    (``2026-12-04T18:00``, local time without an offset), a ``datetime`` or a
    ``timedelta``. ``now_ms``: the pool's clock (Redis time), which claims measure against.
    It must lie ahead of now and within MAX_DEADLINE_MS."""
    if isinstance(value, datetime.timedelta):
        at_ms = now_ms + value.total_seconds() * 1000
    elif isinstance(value, datetime.datetime):
        at_ms = value.timestamp() * 1000  # naive: local time, as fromisoformat's
    elif isinstance(value, str):
        at_ms = _deadline_text(value.strip().lower(), now_ms, source)
    else:
        raise InputError(f"{source} {value!r}: expected a duration (30m), a time (18:00) or "
                         "an ISO-8601 date and time")
    if not math.isfinite(at_ms) or at_ms <= now_ms:
        raise InputError(f"{source} {value!s}: that is in the past (now is "
                         f"{_iso(now_ms)})")
    if at_ms - now_ms > MAX_DEADLINE_MS:
        raise InputError(f"{source} {value!s}: at most {MAX_DEADLINE_MS // 86_400_000} days "
                         "ahead")
    return int(at_ms)


def _deadline_text(text: str, now_ms: int, source: str) -> float:
    ahead = _AHEAD_RE.match(text)
    if ahead:
        return now_ms + float(ahead.group(1)) * _UNIT_MS[ahead.group(2)]
    clock = _CLOCK_RE.match(text)
    if clock:
        now = datetime.datetime.fromtimestamp(now_ms / 1000).astimezone()
        at = now.replace(hour=int(clock.group(1)), minute=int(clock.group(2)),
                         second=int(clock.group(3) or 0), microsecond=0)
        if at.timestamp() * 1000 <= now_ms:
            at += datetime.timedelta(days=1)  # 18:00 at 19:00 means tomorrow's
        return at.timestamp() * 1000
    try:
        return datetime.datetime.fromisoformat(text.upper()).timestamp() * 1000
    except ValueError:
        raise InputError(f"{source} {text!r}: expected a duration (30m, 2h), a time (18:00) "
                         "or an ISO-8601 date and time (2026-12-04T18:00)") from None


def _iso(ms: float) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000).astimezone().isoformat(timespec="seconds")


def money_text(dollars: float | None) -> str:
    """``$2.50``, ``$0.0042``; ``–`` for none."""
    if dollars is None:
        return "–"
    return f"${dollars:.2f}" if dollars >= 1 or dollars == 0 else f"${dollars:.3g}"
