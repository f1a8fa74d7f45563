"""Typed records the client returns. Plain dataclasses, built from Redis hashes."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from nova_queue.keys import split_task_id


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
    attempt: int
    deadline_ms: int
    predicted_s: float | None
    #: Past this Redis time (ms) the lease is not renewed: the task's run-time limit.
    run_deadline_ms: int | None = None
    #: A backup attempt of a task another worker runs too: the first commit wins.
    backup: bool = False


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


def _int(v: Any, default: int = 0) -> int:
    try:
        return int(float(v))
    except (TypeError, ValueError):
        return default


def _float(v: Any) -> float | None:
    try:
        return float(v) if v not in (None, "") else None
    except (TypeError, ValueError):
        return None


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
    attempts: int
    attempt_id: str
    worker_id: str
    worker: str
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
    last_worker: str
    meta: dict[str, Any]
    #: The attempt's run-time limit (Redis ms) while leased.
    run_deadline_ms: int | None = None
    #: Worker ids the task failed on (claims leave it to others while others are live).
    failed_on: tuple[str, ...] = ()
    #: A backup attempt running beside the first one: worker_id, worker, backend, lease_gen,
    #: claimed_ms; None when there is none.
    backup: dict[str, Any] | None = None
    #: The committed result came from a backup attempt (it finished before the first one).
    won_by_backup: bool = False

    @classmethod
    def from_hash(cls, tid: str, h: dict[str, str]) -> TaskInfo:
        job, index = split_task_id(tid)
        try:
            meta = json.loads(h.get("meta") or "{}")
        except ValueError:
            meta = {}
        warm = h.get("warm")
        return cls(
            task_id=tid, job_id=job, index=index, state=h.get("state", "unknown"),
            input=h.get("input", ""), cost=_float(h.get("cost")) or 1.0,
            lease_gen=_int(h.get("lease_gen")), attempts=_int(h.get("attempt_count")),
            attempt_id=h.get("attempt_id", ""), worker_id=h.get("worker", ""),
            worker=h.get("worker_name", ""), backend=h.get("backend", ""),
            host=h.get("host", ""), result=h.get("result", ""),
            claimed_ms=_int(h["claimed_ms"]) if h.get("claimed_ms") else None,
            finished_ms=_int(h["finished_ms"]) if h.get("finished_ms") else None,
            deadline_ms=_int(h["deadline_ms"]) if h.get("deadline_ms") else None,
            predicted_s=_float(h.get("predicted_s")), run_s=_float(h.get("run_s")),
            cold_s=_float(h.get("cold_s")), warm=None if warm in (None, "") else warm == "1",
            error=h.get("error", ""), error_kind=h.get("error_kind", ""),
            last_worker=h.get("last_worker", ""), meta=meta,
            run_deadline_ms=_int(h["run_deadline_ms"]) if h.get("run_deadline_ms") else None,
            failed_on=tuple(w for w in h.get("failed_on", "").split(",") if w),
            backup={"worker_id": h["b_worker"], "worker": h.get("b_worker_name", ""),
                    "backend": h.get("b_backend", ""), "lease_gen": _int(h.get("b_lease_gen")),
                    "claimed_ms": _int(h.get("b_claimed_ms"))} if h.get("b_worker") else None,
            won_by_backup=h.get("won_by_backup") == "1",
        )

    def to_json(self) -> dict[str, Any]:
        """The ``status --json`` / ``/api/jobs/<id>`` shape of one task."""
        return {
            "id": self.task_id, "index": self.index, "state": self.state, "prompt": self.input,
            "cost": self.cost, "worker": self.worker, "worker_id": self.worker_id,
            "backend": self.backend, "host": self.host, "lease_gen": self.lease_gen,
            "attempts": self.attempts, "attempt_id": self.attempt_id, "result": self.result,
            "claimed_ms": self.claimed_ms, "finished_ms": self.finished_ms,
            "deadline_ms": self.deadline_ms, "predicted_s": self.predicted_s,
            "run_s": self.run_s, "cold_s": self.cold_s, "warm": self.warm,
            "error": self.error, "error_kind": self.error_kind,
            "last_worker": self.last_worker, "meta": self.meta,
            "run_deadline_ms": self.run_deadline_ms, "failed_on": list(self.failed_on),
            "backup": self.backup, "won_by_backup": self.won_by_backup,
        }


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

    @classmethod
    def from_hash(cls, h: dict[str, str], tasks: list[TaskInfo]) -> JobStatus:
        try:
            params = json.loads(h.get("params") or "{}")
        except ValueError:
            params = {}
        return cls(
            job_id=h["id"], app=h.get("app", ""), state=h.get("state", ""), params=params,
            priority=_int(h.get("priority")), max_attempts=_int(h.get("max_attempts"), 1),
            name=h.get("name", ""), created_ms=_int(h.get("created_ms")),
            started_ms=_int(h["started_ms"]) if h.get("started_ms") else None,
            finished_ms=_int(h["finished_ms"]) if h.get("finished_ms") else None,
            total=_int(h.get("total")), pending=_int(h.get("pending")),
            leased=_int(h.get("leased")), done=_int(h.get("done")),
            failed=_int(h.get("failed")), cancelled=_int(h.get("cancelled")), tasks=tasks,
            staged=_int(h.get("staged")), timeout_s=_float(h.get("timeout_s")),
        )

    @property
    def terminal(self) -> int:
        return self.done + self.failed + self.cancelled

    @property
    def finished(self) -> bool:
        return self.state in ("done", "cancelled") and self.leased == 0

    def to_json(self, with_tasks: bool = True) -> dict[str, Any]:
        """The ``status --json`` / ``/api/jobs/<id>`` shape."""
        out: dict[str, Any] = {
            "job_id": self.job_id, "app": self.app, "state": self.state, "params": self.params,
            "priority": self.priority, "max_attempts": self.max_attempts, "name": self.name,
            "created_ms": self.created_ms, "started_ms": self.started_ms,
            "finished_ms": self.finished_ms, "total": self.total, "pending": self.pending,
            "leased": self.leased, "done": self.done, "failed": self.failed,
            "cancelled": self.cancelled, "timeout_s": self.timeout_s,
        }
        if with_tasks:
            out["tasks"] = [t.to_json() for t in self.tasks]
        return out


@dataclasses.dataclass(frozen=True)
class WorkerInfo:
    """A registered worker and its per-app speed estimates."""

    worker_id: str
    name: str
    host: str
    host_id: str
    node_id: str
    pid: int
    backend: str
    device: str
    memory_total: int | None
    memory_free: int | None
    apps: list[str]
    state: str
    alive: bool
    joined_ms: int
    last_seen_ms: int | None
    busy_until_ms: int | None
    tasks_done: int
    failures: int
    oom: int
    gflops: float | None
    current: list[str]
    capability: dict[str, Any]
    # per app: {"bench_s": .., "ema_s": .., "samples": .., "cold_s": .., "load_s": .., "done": ..}
    speeds: dict[str, dict[str, float | None]]
    #: Claims refused: its failures succeed elsewhere (or an admin said so).
    quarantined: bool = False
    #: Why (its last error among them).
    quarantine_reason: str = ""
    #: When it may probe with one task (Redis ms).
    quarantine_until_ms: int | None = None
    #: Failed attempts since its last commit, and the last error.
    fail_streak: int = 0
    last_error: str = ""

    @classmethod
    def from_hash(cls, h: dict[str, str], *, alive: bool, current: list[str]) -> WorkerInfo:
        apps = [a for a in h.get("apps", "").split(",") if a]
        try:
            cap = json.loads(h.get("capability") or "{}")
        except ValueError:
            cap = {}
        speeds = {
            app: {
                "bench_s": _float(h.get(f"bench:{app}")), "ema_s": _float(h.get(f"ema:{app}")),
                "samples": _int(h.get(f"n:{app}")), "cold_s": _float(h.get(f"cold:{app}")),
                "load_s": _float(h.get(f"load:{app}")), "done": _int(h.get(f"done:{app}")),
            }
            for app in apps
        }
        return cls(
            worker_id=h.get("id", ""), name=h.get("name", ""), host=h.get("host", ""),
            host_id=h.get("host_id", ""), node_id=h.get("node_id", ""), pid=_int(h.get("pid")),
            backend=h.get("backend", ""), device=h.get("device", ""),
            memory_total=_int(h["memory_total"]) if h.get("memory_total") else None,
            memory_free=_int(h["memory_free"]) if h.get("memory_free") else None,
            apps=apps, state=h.get("state", "") if alive or h.get("state") in ("lost", "stopped")
            else "lost", alive=alive, joined_ms=_int(h.get("joined_ms")),
            last_seen_ms=_int(h["last_seen_ms"]) if h.get("last_seen_ms") else None,
            busy_until_ms=_int(h["busy_until_ms"]) if h.get("busy_until_ms") else None,
            tasks_done=_int(h.get("tasks_done")), failures=_int(h.get("failures")),
            oom=_int(h.get("oom")), gflops=_float(h.get("gflops")), current=current,
            capability=cap, speeds=speeds, quarantined=h.get("quarantined") == "1",
            quarantine_reason=h.get("quarantine_reason", "") if h.get("quarantined") == "1" else "",
            quarantine_until_ms=(_int(h["quarantine_until_ms"])
                                 if h.get("quarantined") == "1" and h.get("quarantine_until_ms")
                                 else None),
            fail_streak=_int(h.get("fail_streak")), last_error=h.get("last_error", ""),
        )

    def to_json(self) -> dict[str, Any]:
        """The ``workers --json`` / ``/api/workers`` shape (first app's speeds flattened)."""
        first = self.speeds.get(self.apps[0], {}) if self.apps else {}
        return {
            "id": self.worker_id, "name": self.name, "host": self.host, "host_id": self.host_id,
            "node_id": self.node_id, "pid": self.pid, "backend": self.backend,
            "device": self.device, "memory_total": self.memory_total,
            "memory_free": self.memory_free, "alive": self.alive, "state": self.state,
            "apps": self.apps, "tasks_done": self.tasks_done, "failures": self.failures,
            "oom": self.oom, "benchmark_s": first.get("bench_s"), "ema_s": first.get("ema_s"),
            "compile_s": first.get("cold_s"), "load_s": first.get("load_s"),
            "gflops": self.gflops, "joined_ms": self.joined_ms,
            "last_seen_ms": self.last_seen_ms, "busy_until_ms": self.busy_until_ms,
            "current": self.current, "speeds": self.speeds, "capability": self.capability,
            "quarantined": self.quarantined, "quarantine_reason": self.quarantine_reason,
            "quarantine_until_ms": self.quarantine_until_ms, "fail_streak": self.fail_streak,
            "last_error": self.last_error,
        }


@dataclasses.dataclass(frozen=True)
class Event:
    """One entry of the namespace's event stream."""

    id: str
    type: str
    ts_ms: int
    fields: dict[str, str]

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "type": self.type, "ts_ms": self.ts_ms, **self.fields}
