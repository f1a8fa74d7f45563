"""What the pool knows of a worker (``workers``, ``/api/workers``): its registry record,
speeds, state, quarantine, identity and the jobs it cannot prepare, read from its hash."""

from __future__ import annotations

import dataclasses
from typing import Any

from nova_queue.cannot_run import CannotRun, live_marks
from nova_queue.keys import ident_of
from nova_queue.models import float_field, int_field, object_field
from nova_queue.placement import labels_from_json
from nova_queue.terms import price_field


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
    #: Its labels (placement.py): what job requirements are checked against.
    labels: dict[str, str] = dataclasses.field(default_factory=dict)
    #: Per app, the model it holds loaded (``warm:<app>``), and how many loads it did.
    warm: dict[str, str] = dataclasses.field(default_factory=dict)
    model_loads: int = 0
    token: str = ""  #: the gateway token it joined with ("": a direct worker)
    #: Its last claim (Redis ms; WAIT answers count): others' claims count on it only while
    #: it claims, or runs what it claimed.
    last_claim_ms: int | None = None

    @property
    def identity(self) -> str:
        """What its blame follows across worker ids (``keys.ident_of``): a gateway worker's
        token, a direct worker's node and name."""
        return ident_of(self.worker_id)
    #: Apps and models it could not prepare, live marks only (nova_queue/cannot_run.py).
    cannot_run: list[CannotRun] = dataclasses.field(default_factory=list)
    #: ``trusted`` or ``new`` (its results are sampled and re-run elsewhere to verify them);
    #: ``vouched``: trusted because the operator said so (NOVA_TRUST, a token's --trust),
    #: not earned by verified results (docs/SECURITY.md)
    trust: str = "trusted"
    vouched: bool = True
    #: dollars per hour of its time (``worker --cost-per-hour``, a token's for a gateway
    #: worker); 0 when it named none
    cost_per_hour: float = 0.0
    #: its identity's verified results and mismatches (``trust:<ident>``)
    verified: int = 0
    mismatches: int = 0
    #: who runs it (a gateway token's --owner); "" for a direct worker (its identity)
    owner: str = ""

    @classmethod
    def from_hash(cls, h: dict[str, str], *, alive: bool, current: list[str],
                  now_ms: int = 0, record: dict[str, str] | None = None) -> WorkerInfo:
        """``now_ms`` (Redis time) decides which ``cannot_run`` marks are still live;
        ``record``: its identity's verification record (``trust:<ident>``)."""
        record = record or {}
        apps = [a for a in h.get("apps", "").split(",") if a]
        cap = object_field(h.get("capability"))
        speeds = {
            app: {
                "bench_s": float_field(h.get(f"bench:{app}")), "ema_s": float_field(h.get(f"ema:{app}")),
                "samples": int_field(h.get(f"n:{app}")), "cold_s": float_field(h.get(f"cold:{app}")),
                "load_s": float_field(h.get(f"load:{app}")), "done": int_field(h.get(f"done:{app}")),
            }
            for app in apps
        }
        return cls(
            worker_id=h.get("id", ""), name=h.get("name", ""), host=h.get("host", ""),
            host_id=h.get("host_id", ""), node_id=h.get("node_id", ""), pid=int_field(h.get("pid")),
            backend=h.get("backend", ""), device=h.get("device", ""),
            memory_total=int_field(h["memory_total"]) if h.get("memory_total") else None,
            memory_free=int_field(h["memory_free"]) if h.get("memory_free") else None,
            apps=apps, state=h.get("state", "") if alive or h.get("state") in ("lost", "stopped")
            else "lost", alive=alive, joined_ms=int_field(h.get("joined_ms")),
            last_seen_ms=int_field(h["last_seen_ms"]) if h.get("last_seen_ms") else None,
            busy_until_ms=int_field(h["busy_until_ms"]) if h.get("busy_until_ms") else None,
            tasks_done=int_field(h.get("tasks_done")), failures=int_field(h.get("failures")),
            oom=int_field(h.get("oom")), gflops=float_field(h.get("gflops")), current=current,
            capability=cap, speeds=speeds, labels=labels_from_json(h.get("labels")),
            warm={a: h[f"warm:{a}"] for a in apps if h.get(f"warm:{a}")},
            model_loads=int_field(h.get("model_loads")), quarantined=h.get("quarantined") == "1",
            quarantine_reason=h.get("quarantine_reason", "") if h.get("quarantined") == "1" else "",
            quarantine_until_ms=(int_field(h["quarantine_until_ms"])
                                 if h.get("quarantined") == "1" and h.get("quarantine_until_ms")
                                 else None),
            fail_streak=int_field(h.get("fail_streak")), last_error=h.get("last_error", ""),
            token=h.get("token", ""), cannot_run=live_marks(h.get("cannot_run"), now_ms),
            last_claim_ms=int_field(h["claim_ms"]) if h.get("claim_ms") else None,
            trust="new" if h.get("trust") == "new" else "trusted",
            vouched=not h.get("trust"),
            verified=int_field(record.get("verified")),
            mismatches=int_field(record.get("mismatches")), owner=h.get("owner", ""),
            cost_per_hour=price_field(h.get("price")))

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
            "last_error": self.last_error, "labels": self.labels, "warm": self.warm,
            "model_loads": self.model_loads, "token": self.token or None,
            "identity": self.identity, "last_claim_ms": self.last_claim_ms,
            "cannot_run": [m.to_json() for m in self.cannot_run],
            "trust": self.trust, "vouched": self.vouched, "verified": self.verified,
            "mismatches": self.mismatches, "owner": self.owner or None,
            "cost_per_hour": self.cost_per_hour,
        }
