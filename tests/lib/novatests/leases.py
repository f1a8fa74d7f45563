"""Helpers of the lease tests: a registered worker, a job, the result key a commit names."""

from __future__ import annotations

from nova_queue import TaskSpec
from nova_queue.keys import result_key
from novatests.seed import claiming


def join(nova, wid: str, apps=("synthetic",), *, claims: bool = True, **fields) -> None:
    """Register ``wid`` (backend cpu) for ``apps``; with ``claims``, as a worker that claims
    (the worker loop claims right after it registers: only then do others' claims count on
    it, ``seed.claiming``)."""
    nova.register_worker(wid, {"name": wid, "backend": "cpu", **fields}, apps)
    if claims:
        claiming(nova, wid)


def setup_job(nova, n: int = 3, cost: float = 1.0, **kw) -> str:
    """A synthetic job of ``n`` tasks of cost ``cost``."""
    return nova.enqueue("synthetic", [TaskSpec(f"p{i}", cost) for i in range(n)], **kw)


def rkey(lease, ext: str = "png") -> str:
    """The result key ``complete`` accepts for ``lease``."""
    return result_key(lease.job_id, lease.index, lease.lease_gen, lease.attempt_id, ext)


def task_hash(nova, tid: str) -> dict[str, str]:
    """A task's hash as Redis holds it."""
    return nova.redis.hgetall(nova.keys.task(tid))


def commit(nova, wid: str, lease, run_s: float = 0.1):
    """Commit ``lease`` as ``wid`` (a warm run of ``run_s``) under its own result key."""
    return nova.complete(wid, lease, rkey(lease), run_s=run_s, warm=True)


def worker_hash(nova, wid: str) -> dict[str, str]:
    """A worker's hash as Redis holds it."""
    return nova.redis.hgetall(nova.keys.worker(wid))


def events(nova, *types: str) -> list:
    """The namespace's events of these types (all without types), oldest first."""
    return [e for e in nova.events(count=100_000) if not types or e.type in types]


def backdate(nova, tid: str, ms: int, field: str = "claimed_ms") -> None:
    """Seed state: the attempt began (or its ``field`` time is) ``ms`` earlier."""
    nova.redis.hset(nova.keys.task(tid), field, int(task_hash(nova, tid)[field]) - ms)
