"""The worker protocol's values as JSON, for the gateway (``nova_queue/gateway``) and its
client in the worker (``nova_queue.workers.link``): one definition on both sides."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from nova_queue.errors import InputError
from nova_queue.keys import ATTEMPT_ID_RE, split_task_id
from nova_queue.models import ClaimResult, Lease, RenewResult

#: The lease fields a fenced call (complete, fail, upload) sends back.
FENCE_FIELDS = ("task_id", "app", "lease_gen", "attempt_id")


def lease_to_json(lease: Lease) -> dict[str, Any]:
    """A lease as a JSON object (every field)."""
    return dataclasses.asdict(lease)


def lease_from_json(d: Mapping[str, Any]) -> Lease:
    """A lease the gateway sent (every field)."""
    names = {f.name for f in dataclasses.fields(Lease)}
    return Lease(**{k: v for k, v in d.items() if k in names})


def claim_to_json(res: ClaimResult) -> dict[str, Any]:
    """A claim's answer as a JSON object."""
    return {"status": res.status, "leases": [lease_to_json(x) for x in res.leases],
            "retry_after_s": res.retry_after_s, "now_ms": res.now_ms, "reason": res.reason}


def claim_from_json(d: Mapping[str, Any]) -> ClaimResult:
    """A claim's answer the gateway sent."""
    return ClaimResult(str(d["status"]), [lease_from_json(x) for x in d.get("leases", [])],
                       float(d.get("retry_after_s", 0.0)), int(d.get("now_ms", 0)),
                       str(d.get("reason", "")))


def renew_to_json(res: RenewResult) -> dict[str, Any]:
    """A renewal's answer as a JSON object."""
    return {"lost": list(res.lost), "now_ms": res.now_ms, "worker_lost": res.worker_lost,
            "reasons": dict(res.reasons)}


def renew_from_json(d: Mapping[str, Any]) -> RenewResult:
    """A renewal's answer the gateway sent."""
    return RenewResult(lost=[str(t) for t in d.get("lost", [])], now_ms=int(d["now_ms"]),
                       worker_lost=bool(d.get("worker_lost")),
                       reasons={str(k): str(v) for k, v in d.get("reasons", {}).items()})


def fenced_lease(d: object) -> Lease:
    """The lease of a fenced call a worker sent: its task id, app, lease_gen and attempt id
    checked; the job id and index come from the task id (never from the caller)."""
    if not isinstance(d, Mapping):
        raise InputError("lease: expected a JSON object")
    try:
        tid, app = str(d["task_id"]), str(d["app"])
        gen, attempt_id = int(d["lease_gen"]), str(d["attempt_id"])
        job, index = split_task_id(tid)
    except (KeyError, TypeError, ValueError):
        raise InputError(f"lease: needs {', '.join(FENCE_FIELDS)}") from None
    if not job or not ATTEMPT_ID_RE.match(attempt_id) or not 0 < gen < 2**53:
        raise InputError("lease: invalid task id, lease_gen or attempt id")
    return Lease(task_id=tid, job_id=job, index=index, app=app, input="", cost=1.0, params={},
                 lease_gen=gen, attempt_id=attempt_id, attempt=0, deadline_ms=0,
                 predicted_s=None)
