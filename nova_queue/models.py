"""Typed records the client returns. Plain dataclasses, built from Redis hashes."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from typing import Any

from nova_queue.events import Event  # noqa: F401  (re-exported: it lived here)
from nova_queue.keys import split_task_id
from nova_queue.placement import requirement_text, requirements_from_json


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """One task of a job as an app describes it: its input and its relative cost."""

    input: str
    cost: float = 1.0


@dataclasses.dataclass(frozen=True)
class Lease:
    """A task held by a worker; every fenced call carries ``lease_gen`` and ``attempt_id``."""

    task_id: str
    job_id: str
    index: int
    app: str
    input: str
    cost: float
    params: dict[str, Any]
    lease_gen: int
    attempt_id: str
    #: which attempt this lease is, 1 for the first (the task's ``attempt_count`` now)
    attempt: int
    deadline_ms: int
    predicted_s: float | None
    #: Past this Redis time (ms) the lease is not renewed: the task's run-time limit.
    run_deadline_ms: int | None = None
    #: A backup attempt of a task another worker runs too: the first commit wins.
    backup: bool = False
    #: A verification run: the result keys of the candidates to compare this run's result
    #: with (``{"cand": key}``, and ``"cand2"`` for a second opinion that disagreed); the
    #: commit's provenance says ``{"verify": {"cand": "agree" | "mismatch", ...}}``.
    verify: Mapping[str, str] | None = None


@dataclasses.dataclass(frozen=True)
class ClaimResult:
    """What ``claim`` answered: leases, or a hint when to ask again."""

    status: str  # "ok" | "wait" | "empty" | "quarantined"
    leases: list[Lease]
    retry_after_s: float = 0.0
    now_ms: int = 0
    #: Why claims are refused (``quarantined``).
    reason: str = ""


@dataclasses.dataclass(frozen=True)
class RenewResult:
    """Leases the worker asked to renew but no longer holds, and why."""

    lost: list[str]
    now_ms: int
    #: The worker was not registered or was declared lost: it must register again.
    worker_lost: bool = False
    #: task id -> why it was lost: ``timeout`` (past its run-time limit), ``superseded``
    #: (another attempt committed first), ``cancelled``, ``expired``, ``lost``, ...
    reasons: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class CompleteResult:
    """A committed result; ``replayed`` when the same commit had already taken effect."""

    job_finished: bool
    replayed: bool = False


@dataclasses.dataclass(frozen=True)
class FailResult:
    """``requeued`` is False when the task is now failed for good (or cancelled)."""

    requeued: bool
    state: str


#: Largest magnitude a number read back from Redis is taken at (2**53: what a double, and so
#: JSON, holds exactly; far past any real count, size or time in ms). Any worker credential
#: may HSET a field to anything ("inf", "1e400", 400 digits), and one unreadable field must
#: not break a page, a CLI table or the post-worker.
MAX_FIELD_NUMBER = 2**53


def _json_list(raw: Any) -> Any:
    """A JSON list field (a job's ``requires``); anything else reads as []."""
    try:
        value = json.loads(raw) if isinstance(raw, str) and len(raw) <= 8192 else []
    except ValueError:
        return []
    return value if isinstance(value, list) else []


def int_field(v: Any, default: int = 0) -> int:
    """A hash field as an int: ``default`` unless it is a finite number within
    :data:`MAX_FIELD_NUMBER`."""
    f = float_field(v)
    return default if f is None else int(f)


def float_field(v: Any) -> float | None:
    """A hash field as a float: None unless it is a finite number within
    :data:`MAX_FIELD_NUMBER`."""
    try:
        f = float(v) if v not in (None, "") else None
    except (TypeError, ValueError):
        return None
    return f if f is not None and math.isfinite(f) and abs(f) <= MAX_FIELD_NUMBER else None


def object_field(v: Any) -> dict[str, Any]:
    """A hash field holding a JSON object; ``{}`` for anything else (a list, a number,
    nesting too deep for the parser)."""
    try:
        out = json.loads(v or "{}")
    except (TypeError, ValueError, RecursionError):
        return {}
    return out if isinstance(out, dict) else {}


@dataclasses.dataclass(frozen=True)
class TaskInfo:
    """A task as stored in Redis, for status pages and the CLI."""

    task_id: str
    job_id: str
    index: int
    state: str
    input: str
    cost: float
    lease_gen: int
    #: attempts counted so far (Redis field ``attempt_count``; 0 before the first claim)
    attempt_count: int
    attempt_id: str
    #: the holder's id (Redis field ``worker``)
    worker_id: str
    #: the holder's name (Redis field ``worker_name``)
    worker_name: str
    backend: str
    host: str
    result: str
    claimed_ms: int | None
    finished_ms: int | None
    deadline_ms: int | None
    predicted_s: float | None
    run_s: float | None
    cold_s: float | None
    warm: bool | None
    error: str
    error_kind: str
    #: id of the worker that last released or lost the task (Redis field ``last_worker``)
    last_worker_id: str
    meta: dict[str, Any]
    #: The attempt's run-time limit (Redis ms) while leased.
    run_deadline_ms: int | None = None
    #: Identities of the workers the task failed on (``keys.ident_of``; claims leave it to
    #: others while others are live).
    failed_on: tuple[str, ...] = ()
    #: A backup attempt running beside the first one: worker_id, worker, backend, lease_gen,
    #: claimed_ms; None when there is none.
    backup: dict[str, Any] | None = None
    #: The committed result came from a backup attempt (it finished before the first one).
    won_by_backup: bool = False
    #: The worker id (and name) that re-ran the task and agreed with its result ('' if none).
    verified_by: str = ""
    verified_by_name: str = ""
    #: While the task is ``verifying`` (or leased to its verifier): the worker ids whose
    #: results await verification.
    candidates: tuple[str, ...] = ()

    @classmethod
    def from_hash(cls, tid: str, h: dict[str, str]) -> TaskInfo:
        job, index = split_task_id(tid)
        meta = object_field(h.get("meta"))
        warm = h.get("warm")
        return cls(
            task_id=tid, job_id=job, index=index, state=h.get("state", "unknown"),
            input=h.get("input", ""), cost=float_field(h.get("cost")) or 1.0,
            lease_gen=int_field(h.get("lease_gen")),
            attempt_count=int_field(h.get("attempt_count")),
            attempt_id=h.get("attempt_id", ""), worker_id=h.get("worker", ""),
            worker_name=h.get("worker_name", ""), backend=h.get("backend", ""),
            host=h.get("host", ""), result=h.get("result", ""),
            claimed_ms=int_field(h["claimed_ms"]) if h.get("claimed_ms") else None,
            finished_ms=int_field(h["finished_ms"]) if h.get("finished_ms") else None,
            deadline_ms=int_field(h["deadline_ms"]) if h.get("deadline_ms") else None,
            predicted_s=float_field(h.get("predicted_s")), run_s=float_field(h.get("run_s")),
            cold_s=float_field(h.get("cold_s")), warm=None if warm in (None, "") else warm == "1",
            error=h.get("error", ""), error_kind=h.get("error_kind", ""),
            last_worker_id=h.get("last_worker", ""), meta=meta,
            run_deadline_ms=int_field(h["run_deadline_ms"]) if h.get("run_deadline_ms") else None,
            failed_on=tuple(w for w in h.get("failed_on", "").split(",") if w),
            backup={"worker_id": h["b_worker"], "worker": h.get("b_worker_name", ""),
                    "backend": h.get("b_backend", ""), "lease_gen": int_field(h.get("b_lease_gen")),
                    "claimed_ms": int_field(h.get("b_claimed_ms"))} if h.get("b_worker") else None,
            won_by_backup=h.get("won_by_backup") == "1",
            verified_by=h.get("verified_by", ""), verified_by_name=h.get("verified_by_name", ""),
            candidates=tuple(h[f] for f in ("cand_wid", "cand2_wid") if h.get(f)),
        )

    def to_json(self) -> dict[str, Any]:
        """The ``status --json`` / ``/api/jobs/<id>`` shape of one task."""
        return {
            "id": self.task_id, "index": self.index, "state": self.state, "prompt": self.input,
            "cost": self.cost, "worker": self.worker_name, "worker_id": self.worker_id,
            "backend": self.backend, "host": self.host, "lease_gen": self.lease_gen,
            "attempts": self.attempt_count, "attempt_id": self.attempt_id, "result": self.result,
            "claimed_ms": self.claimed_ms, "finished_ms": self.finished_ms,
            "deadline_ms": self.deadline_ms, "predicted_s": self.predicted_s,
            "run_s": self.run_s, "cold_s": self.cold_s, "warm": self.warm,
            "error": self.error, "error_kind": self.error_kind,
            "last_worker": self.last_worker_id, "meta": self.meta,
            "run_deadline_ms": self.run_deadline_ms, "failed_on": list(self.failed_on),
            "backup": self.backup, "won_by_backup": self.won_by_backup,
            "verified_by": self.verified_by or None,
            "verified_by_name": self.verified_by_name or None,
            "candidates": list(self.candidates),
        }


#: A job's states once every task ended: done (a task or more done; ``failed`` counts those
#: that were not), failed (not one task done) and cancelled.
FINISHED_STATES = ("done", "failed", "cancelled")


@dataclasses.dataclass(frozen=True)
class JobStatus:
    """A job's counters, and its tasks when asked for."""

    job_id: str
    app: str
    state: str
    params: dict[str, Any]
    priority: int
    max_attempts: int
    name: str
    created_ms: int
    started_ms: int | None
    finished_ms: int | None
    total: int
    pending: int
    leased: int
    done: int
    failed: int
    cancelled: int
    tasks: list[TaskInfo]
    #: Tasks written so far while the job is ``staging`` (equals ``total`` once published).
    staged: int = 0
    #: Run-time limit per task (s); None: derived from each claim's prediction.
    timeout_s: float | None = None
    #: What a worker's labels must meet (``placement.Requirement`` tuples).
    requires: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    #: Whose share of the pool it uses, and the model its tasks need warm ('' if none).
    owner: str = ""
    model: str = ""
    #: Tasks whose result awaits verification (not counted done until it stands).
    verifying: int = 0
    #: Its terms (``enqueue --deadline``, ``--budget``; nova_queue/terms.py): when it should
    #: be done (epoch ms, Redis time) and what it may spend (dollars); None: no such term.
    deadline_ms: int | None = None
    budget: float | None = None
    #: Dollars: predicted at each claim (price x predicted run time: what a budget caps),
    #: and of the runs committed so far (price x run time).
    spent: float = 0.0
    cost: float = 0.0
    #: when a claim first found its deadline out of the live pool's reach, and first held
    #: it back for its budget (Redis ms)
    behind_ms: int | None = None
    held_ms: int | None = None

    @classmethod
    def from_hash(cls, h: dict[str, str], tasks: list[TaskInfo]) -> JobStatus:
        params = object_field(h.get("params"))
        return cls(
            job_id=h["id"], app=h.get("app", ""), state=h.get("state", ""), params=params,
            priority=int_field(h.get("priority")), max_attempts=int_field(h.get("max_attempts"), 1),
            name=h.get("name", ""), created_ms=int_field(h.get("created_ms")),
            started_ms=int_field(h["started_ms"]) if h.get("started_ms") else None,
            finished_ms=int_field(h["finished_ms"]) if h.get("finished_ms") else None,
            total=int_field(h.get("total")), pending=int_field(h.get("pending")),
            leased=int_field(h.get("leased")), done=int_field(h.get("done")),
            failed=int_field(h.get("failed")), cancelled=int_field(h.get("cancelled")), tasks=tasks,
            staged=int_field(h.get("staged")), timeout_s=float_field(h.get("timeout_s")),
            requires=tuple(requirements_from_json(_json_list(h.get("requires")))),
            owner=h.get("owner", ""), model=h.get("model", ""),
            verifying=int_field(h.get("verifying")),
            deadline_ms=int_field(h["deadline_ms"]) if h.get("deadline_ms") else None,
            budget=float_field(h.get("budget")), spent=float_field(h.get("spent")) or 0.0,
            cost=float_field(h.get("cost")) or 0.0,
            behind_ms=int_field(h["behind_ms"]) if h.get("behind_ms") else None,
            held_ms=int_field(h["held_ms"]) if h.get("held_ms") else None,
        )

    @property
    def terminal(self) -> int:
        return self.done + self.failed + self.cancelled

    @property
    def finished(self) -> bool:
        """Every task ended and no lease is left: state done, failed or cancelled."""
        return self.state in FINISHED_STATES and self.leased == 0

    def to_json(self, with_tasks: bool = True) -> dict[str, Any]:
        """The ``status --json`` / ``/api/jobs/<id>`` shape."""
        out: dict[str, Any] = {
            "job_id": self.job_id, "app": self.app, "state": self.state, "params": self.params,
            "priority": self.priority, "max_attempts": self.max_attempts, "name": self.name,
            "created_ms": self.created_ms, "started_ms": self.started_ms,
            "finished_ms": self.finished_ms, "total": self.total, "pending": self.pending,
            "leased": self.leased, "done": self.done, "failed": self.failed,
            "cancelled": self.cancelled, "timeout_s": self.timeout_s,
            "requires": [requirement_text(r) for r in self.requires], "owner": self.owner,
            "model": self.model, "verifying": self.verifying, "deadline_ms": self.deadline_ms,
            "budget": self.budget, "cost_so_far": self.cost, "spent_predicted": self.spent,
        }
        if with_tasks:
            out["tasks"] = [t.to_json() for t in self.tasks]
        return out
