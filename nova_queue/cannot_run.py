"""What a worker cannot run: its ``cannot_run`` marks, and why a job no live worker can run
waits.

A worker that fails to prepare a job (its app's runtime will not import, its model is not
found or not allowed, the device will not initialise) hands the job's leases back without
using an attempt (``fail`` kind ``prepare``), and ``lua/fail-10.lua`` marks it: the worker
hash's ``cannot_run`` field, a JSON list of at most :data:`~nova_queue.limits.MAX_CANNOT_RUN`
``{app, model, reason, since_ms, until_ms}`` (one per app and model: a job without a model
has model ''). Claims then offer it no job of that app and model, and other workers' claims
do not wait for it, until the mark ends (``NOVA_CANNOT_RUN_S``) or the worker restarts (a
new worker id has no marks). Readers here see live marks only.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from typing import Any

from nova_queue.keys import APP_NAME_RE
from nova_queue.limits import MAX_CANNOT_RUN, MAX_MARKS_BYTES, MAX_REASON_BYTES
from nova_queue.placement import Requirement, labels_from_json, meets

#: A job's ``model`` as the scripts accept it (``lua/includes/job_fields.lua``).
MODEL_RE = re.compile(r"^[A-Za-z0-9_.:@+/-]{0,128}\Z")
#: Workers a "no live worker can run this job" text names (the rest are counted).
SHOWN_WORKERS = 5


@dataclasses.dataclass(frozen=True)
class CannotRun:
    """One live mark: the worker cannot run jobs of ``app`` with ``model`` until ``until_ms``
    (Redis time), since ``since_ms``, because of ``reason``."""

    app: str
    model: str
    reason: str
    since_ms: int
    until_ms: int

    def to_json(self) -> dict[str, Any]:
        """``{app, model, reason, since, until}`` (``since``/``until``: Redis time, ms)."""
        return {"app": self.app, "model": self.model, "reason": self.reason,
                "since": self.since_ms, "until": self.until_ms}


def live_marks(raw: str | None, now_ms: int) -> list[CannotRun]:
    """The marks of a ``cannot_run`` field still live at ``now_ms``, as the scripts read it
    (``lua/includes/live_marks.lua``): anything that is not such a list counts as none."""
    try:
        decoded = json.loads(raw) if raw and len(raw) <= MAX_MARKS_BYTES else []
    except (ValueError, RecursionError):
        return []
    out: list[CannotRun] = []
    for m in decoded[:MAX_CANNOT_RUN] if isinstance(decoded, list) else []:
        if not isinstance(m, dict):
            break
        until, since = _ms(m.get("until_ms")), _ms(m.get("since_ms"))
        app, model, reason = m.get("app"), m.get("model"), m.get("reason")
        if (until is not None and until > now_ms and isinstance(app, str)
                and APP_NAME_RE.match(app) and isinstance(model, str)
                and MODEL_RE.match(model)):
            text = reason[:MAX_REASON_BYTES] if isinstance(reason, str) else ""
            out.append(CannotRun(app, model, text, until if since is None else since, until))
    return out


def _ms(value: object) -> int | None:
    """A time in ms as the scripts write it (a JSON number), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value) if 0 <= value <= 1e15 else None


@dataclasses.dataclass(frozen=True)
class Blocked:
    """A live worker that serves a job's app and meets its requirements, but cannot run it."""

    worker_id: str
    name: str
    mark: CannotRun

    def to_json(self) -> dict[str, Any]:
        """``{worker_id, name, reason, since, until}``."""
        return {"worker_id": self.worker_id, "name": self.name, "reason": self.mark.reason,
                "since": self.mark.since_ms, "until": self.mark.until_ms}


@dataclasses.dataclass(frozen=True)
class Runners:
    """Who can run a job: ``eligible`` worker ids, and ``blocked`` (those its labels
    allow that hold a live mark for its app and model)."""

    eligible: list[str]
    blocked: list[Blocked]


def split_runners(app: str, model: str, requires: Sequence[Requirement],
                  rows: dict[str, tuple[str | None, str | None, str | None]],
                  now_ms: int) -> Runners:
    """``rows``: live workers of ``app`` -> their ``labels``, ``cannot_run`` and ``name``
    fields. Those whose labels meet ``requires`` are eligible unless marked for
    (``app``, ``model``)."""
    eligible, blocked = [], []
    for wid, (labels, marks, name) in sorted(rows.items()):
        if requires and not meets(labels_from_json(labels), requires):
            continue
        mark = next((m for m in live_marks(marks, now_ms) if (m.app, m.model) == (app, model)),
                    None)
        if mark is None:
            eligible.append(wid)
        else:
            blocked.append(Blocked(wid, name or wid, mark))
    return Runners(eligible, blocked)


def blocked_text(blocked: Sequence[Blocked]) -> str:
    """``no live worker can run this job — w1: No module named 'torch'; w2: ...``."""
    shown = "; ".join(f"{b.name}: {b.mark.reason}" for b in blocked[:SHOWN_WORKERS])
    more = len(blocked) - SHOWN_WORKERS
    return ("no live worker can run this job — " + shown
            + (f" (and {more} more worker{'s' if more > 1 else ''})" if more > 0 else ""))
