"""Helpers of the lease tests: a registered worker, a job, the result key a commit names."""

from __future__ import annotations

from nova_queue import TaskSpec
from nova_queue.keys import result_key


def join(nova, wid: str, apps=("synthetic",), **fields) -> None:
    """Register ``wid`` (backend cpu) for ``apps``."""
    nova.register_worker(wid, {"name": wid, "backend": "cpu", **fields}, apps)


def setup_job(nova, n: int = 3, **kw) -> str:
    """A synthetic job of ``n`` tasks of cost 1."""
    return nova.enqueue("synthetic", [TaskSpec(f"p{i}") for i in range(n)], **kw)


def rkey(lease, ext: str = "png") -> str:
    """The result key ``complete`` accepts for ``lease``."""
    return result_key(lease.job_id, lease.index, lease.lease_gen, lease.attempt_id, ext)


def task_hash(nova, tid: str) -> dict[str, str]:
    """A task's hash as Redis holds it."""
    return nova.redis.hgetall(nova.keys.task(tid))
