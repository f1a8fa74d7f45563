"""The batched commit a worker makes after a run of small tasks: ``complete_batch`` commits
up to 64 results in one call (``complete_batch-12``), each fenced and answered on its own,
and may claim the next tasks in the same round trip. A part of
:class:`~nova_queue.client.NovaClient`, which reads its key lists, a claim's arguments and
the claim's answer as the worker's single calls do (:class:`~nova_queue.client.worker.WorkerCalls`)."""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any

import redis

from nova_queue import errors
from nova_queue.client.caller import Caller
from nova_queue.client.part import Part
from nova_queue.client.worker import WorkerCalls
from nova_queue.keys import Keyspace
from nova_queue.limits import MAX_CLAIM_K, MAX_RUN_S
from nova_queue.models import ClaimResult, CompleteResult, Lease
from nova_queue.results import check_inline
from nova_queue.settings import Settings


@dataclasses.dataclass(frozen=True)
class BatchCommit:
    """One result of a batch: what ``complete`` takes for one lease."""

    lease: Lease
    result_key: str
    run_s: float
    warm: bool
    meta: Mapping[str, Any] | None = None
    #: the result itself when held inline (see ``complete``); empty: in the store
    inline: bytes = b""


@dataclasses.dataclass(frozen=True)
class BatchResult:
    """``results[i]`` answers ``commits[i]``: a CompleteResult (``replayed`` for a commit that
    had taken effect already) or the error its code means (StaleResultError,
    JobCancelledError, TaskNotFoundError), returned, not raised. ``claimed``: the claim's
    answer, None when none was asked for or the worker is not registered."""

    results: list[CompleteResult | errors.NovaError]
    claimed: ClaimResult | None = None

    @property
    def committed(self) -> int:
        """How many commits hold (taken effect now or before)."""
        return sum(isinstance(r, CompleteResult) for r in self.results)


class BatchCalls(Part):
    """``complete_batch``, beside the worker's single calls (``worker``)."""

    def __init__(self, client: redis.Redis, keys: Keyspace, settings: Settings,
                 caller: Caller, worker: WorkerCalls):
        super().__init__(client, keys, settings, caller)
        self.worker = worker

    def complete_batch(self, worker_id: str, commits: Sequence[BatchCommit], *,
                       app: str | None = None, k: int = 1,
                       attempt_ids: Sequence[str] | None = None) -> BatchResult:
        """Commit up to 64 results of ``worker_id`` in one call, each fenced as ``complete``
        fences one; with ``app``, then ``claim(worker_id, app, k)`` in the same call.
        Retrying after a lost reply with the same commits and ``attempt_ids`` returns the
        same answers (ALREADY for the commits that held) and the same leases."""
        if not 1 <= len(commits) <= MAX_CLAIM_K:
            raise ValueError(f"a batch commits 1 to {MAX_CLAIM_K} results")
        st = self.settings
        args: list[Any] = [self.prefix, worker_id, st.ema_alpha, self.maxlen,
                           st.quarantine_after, int(st.quarantine_cooldown_s * 1000),
                           len(commits)]
        for c in commits:
            if not 0 <= c.run_s <= MAX_RUN_S:  # also false for NaN
                raise errors.InputError(f"run_s must be a number from 0 to {MAX_RUN_S}, "
                                        f"not {c.run_s!r}")
            check_inline(c.inline)
            args += [c.lease.task_id, c.lease.lease_gen, c.lease.attempt_id, c.result_key,
                     repr(float(c.run_s)), int(c.warm), _meta_json(c.meta), c.inline]
        k_ = self.keys
        keys = [k_.worker(worker_id), k_.held(worker_id), k_.leases(), k_.alive(),
                k_.inflight(), k_.failed(), k_.finished(), k_.events()]
        worker = self.worker
        if app is None:
            keys += worker.next_claim_keys(commits[0].lease.app)  # not read without a claim
        else:
            keys += worker.next_claim_keys(app)
            args += worker.claim_args(app, k, attempt_ids).for_every_id().argv()
        res = self.caller.run("complete_batch", keys, args)
        results = [_answer(int(code), bool(int(fin)), c.lease.task_id)
                   for code, fin, c in zip(res[0], res[1], commits, strict=True)]
        if app is None or int(res[2]) == errors.WORKER_LOST:
            return BatchResult(results)
        return BatchResult(results, worker.claim_result(app, int(res[2]), int(res[3]), res[4],
                                                        *res[5:6]))


#: The answers of commits that held, by (job finished, replayed): one object each (frozen).
_HELD = {(f, r): CompleteResult(job_finished=f, replayed=r) for f in (False, True)
         for r in (False, True)}


def _answer(code: int, finished: bool, task_id: str) -> CompleteResult | errors.NovaError:
    """One commit's answer: its result, or the error its code raises."""
    if code == 0:
        return _HELD[(finished, False)]
    try:
        errors.raise_for_code(code, task_id=task_id)
    except errors.NovaError as exc:
        return exc
    return _HELD[(finished, code == errors.ALREADY)]


def _meta_json(meta: Mapping[str, Any]) -> str:
    """A commit's meta as JSON; a batch's metas are mostly alike (the same worker, backend
    and content type): the texts of the last few all-text ones are reused (only text: 1,
    1.0 and True are one cache key, and three JSON texts)."""
    if not meta:
        return "{}"
    if all(type(v) is str for v in meta.values()):
        return _meta_text(tuple(meta.items()))
    return json.dumps(dict(meta))


@functools.lru_cache(maxsize=64)
def _meta_text(items: tuple[tuple[str, Any], ...]) -> str:
    return json.dumps(dict(items))
