"""The fenced calls a worker makes: register, claim, renew, complete (and complete with
the next claim), fail, model loads, deregister, and reap. A part of
:class:`~nova_queue.client.NovaClient`; each call is one Lua script, its status codes mapped
to exceptions by ``errors``. The hot calls' key lists are built once per worker and app."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import redis

from nova_queue import errors
from nova_queue.claim_args import ClaimArgs
from nova_queue.client.caller import Caller
from nova_queue.client.part import Part
from nova_queue.keys import APP_NAME_RE, WORKER_ID_RE, Keyspace
from nova_queue.limits import MAX_APPS, MAX_CLAIM_K, MAX_RENEW_LEASES, MAX_RUN_S
from nova_queue.models import ClaimResult, CompleteResult, FailResult, Lease, RenewResult
from nova_queue.results import check_inline
from nova_queue.settings import Settings

#: Most lost workers and most expired leases one call reaps (each kind; the scripts cap it
#: at 1000, and at 1000 leases released per call in all).
REAP_LIMIT = 100
#: Longest error message stored with a failed task (the script keeps at most 8192 bytes).
MAX_ERROR_CHARS = 2000
#: A job still staging after this long was abandoned by its producer; reap deletes it.
STAGING_ABANDONED_MS = 3600 * 1000


class WorkerCalls(Part):
    """The worker side of the client: every call fenced by the worker's lease."""

    def __init__(self, client: redis.Redis, keys: Keyspace, settings: Settings,
                 caller: Caller):
        super().__init__(client, keys, settings, caller)
        #: key lists of the hot calls, per (call, worker, app): built once
        self._key_lists: dict[tuple[str, str, str], list[str]] = {}
        #: silence after which the scripts open a grace window. A holder may renew up to
        #: one heartbeat before a silence and one after it, so without grace an outage of D
        #: is safe only while D + 2 heartbeats < TTL: fire well before that.
        ttl, hb = settings.lease_ttl_ms, settings.heartbeat_interval_ms
        self.gap_ms = int(max(1.5 * hb, min(ttl / 2, ttl - 2 * hb - 250)))

    def claim_args(self, app: str, k: int, attempt_ids: Sequence[str] | None) -> ClaimArgs:
        """A claim's arguments (every claiming script's one layout): ``k`` tasks of ``app``
        under fresh attempt ids unless ``attempt_ids`` (a retry's) are given."""
        if not 1 <= k <= MAX_CLAIM_K:
            raise ValueError(f"k must be from 1 to {MAX_CLAIM_K}")
        st = self.settings
        ids = list(attempt_ids) if attempt_ids else [secrets.token_hex(8) for _ in range(k)]
        return ClaimArgs(app, k, st.lease_ttl_ms, self.gap_ms, REAP_LIMIT,
                         int(st.task_timeout_floor_s * 1000), repr(float(st.task_timeout_factor)),
                         ids)

    def claim_keys(self, worker_id: str, app: str) -> list[str]:
        """claim-12's KEYS for ``worker_id`` and ``app`` (one list per pair, reused)."""
        cache_key = ("claim", worker_id, app)
        keys = self._key_lists.get(cache_key)
        if keys is None:
            k = self.keys
            keys = self._key_lists[cache_key] = [
                k.pending(app), k.worker(worker_id), k.held(worker_id), k.app_fleet(app),
                k.app_workers(app), k.leases(), k.alive(), k.inflight(), k.failed(),
                k.finished(), k.meta(), k.events()]
        return keys

    def commit_keys(self, worker_id: str, app: str) -> list[str]:
        """complete-11's KEYS[3..11] for ``worker_id`` and the task's ``app``."""
        cache_key = ("complete", worker_id, app)
        keys = self._key_lists.get(cache_key)
        if keys is None:
            k = self.keys
            keys = self._key_lists[cache_key] = [
                k.worker(worker_id), k.held(worker_id), k.app_fleet(app), k.leases(),
                k.alive(), k.inflight(), k.failed(), k.finished(), k.events()]
        return keys

    def next_claim_keys(self, app: str) -> list[str]:
        """complete_claim-15's KEYS[12..15], the claim's own: ``app``'s pending set, fleet and
        workers set, and the meta hash (the claim shares KEYS[3..11] with the commit)."""
        cache_key = ("next_claim", "", app)
        keys = self._key_lists.get(cache_key)
        if keys is None:
            k = self.keys
            keys = self._key_lists[cache_key] = [
                k.pending(app), k.app_fleet(app), k.app_workers(app), k.meta()]
        return keys

    def register_worker(self, worker_id: str, fields: Mapping[str, Any], apps: Iterable[str],
                        bench: Mapping[str, Mapping[str, float | None]] | None = None) -> bool:
        """Join the fleet (or re-join); returns True if the id was known before."""
        app_list = [a for a in apps]
        for a in app_list:
            if not isinstance(a, str) or not APP_NAME_RE.match(a):
                raise errors.InputError(f"invalid app name {a!r}")
        if len(app_list) > MAX_APPS:
            raise errors.InputError(f"a worker serves at most {MAX_APPS} apps")
        check_worker_id(worker_id)
        clean = {k: ("" if v is None else str(v)) for k, v in fields.items()}
        k = self.keys
        bench_json = json.dumps({a: {kk: vv for kk, vv in b.items() if vv is not None}
                                 for a, b in (bench or {}).items()})
        _, rejoined = self.caller.run(
            "register",
            [k.worker(worker_id), k.workers(), k.alive(), k.events(), k.meta(), k.idents()],
            [self.prefix, worker_id, self.settings.lease_ttl_ms, self.maxlen,
             json.dumps(clean), ",".join(app_list), bench_json])
        return bool(int(rejoined))

    def deregister_worker(self, worker_id: str) -> int:
        """Leave the fleet; leases still held return to pending without using an attempt."""
        k = self.keys
        code, released = self.caller.run(
            "deregister",
            [k.worker(worker_id), k.held(worker_id), k.leases(), k.alive(), k.inflight(),
             k.failed(), k.finished(), k.events(), k.meta()],
            [self.prefix, worker_id, self.maxlen])
        return int(released) if code == 0 else 0

    def claim(self, worker_id: str, app: str, k: int = 1,
              attempt_ids: Sequence[str] | None = None) -> ClaimResult:
        """Lease up to ``k`` tasks of ``app`` (1..64), or learn when to ask again."""
        args = self.claim_args(app, k, attempt_ids)
        res = self.caller.run("claim", self.claim_keys(worker_id, app),
                              [self.prefix, worker_id, self.maxlen, *args.argv()])
        return self.claim_result(app, int(res[0]), int(res[1]), res[2], *res[3:4])

    @staticmethod
    def claim_result(app: str, code: int, now_ms: int, payload: Any,
                     reason: str = "") -> ClaimResult:
        """A claiming script's answer (code, Redis ms, leases as JSON or the wait in ms, a
        quarantine's reason) as a ClaimResult; raises for an error code."""
        if code == errors.WAIT:
            return ClaimResult("wait", [], int(payload) / 1000, now_ms)
        if code == errors.EMPTY:
            return ClaimResult("empty", [], int(payload) / 1000, now_ms)
        if code == errors.QUARANTINED:
            return ClaimResult("quarantined", [], int(payload) / 1000, now_ms, str(reason))
        errors.raise_for_code(code, detail=str(payload))
        params: dict[str, dict[str, Any]] = {}  # a job's params text, decoded once per claim

        def decoded(text: str) -> dict[str, Any]:
            got = params.get(text)
            if got is None:
                got = params[text] = json.loads(text)
            return got

        leases = [
            Lease(task_id=d["tid"], job_id=d["job"], index=int(d["index"]), app=app,
                  input=d["input"], cost=float(d["cost"]), params=decoded(d["params"]),
                  lease_gen=int(d["lease_gen"]), attempt_id=d["attempt_id"],
                  attempt=int(d["attempt"]), deadline_ms=int(d["deadline_ms"]),
                  predicted_s=None if d.get("predicted_s") is None else float(d["predicted_s"]),
                  run_deadline_ms=int(d["run_deadline_ms"]) if d.get("run_deadline_ms") else None,
                  backup=bool(d.get("backup")), verify=_candidates(d.get("verify")))
            for d in json.loads(payload)
        ]
        return ClaimResult("ok", leases, 0.0, now_ms)

    def renew(self, worker_id: str, leases: Iterable[Lease]) -> RenewResult:
        """Heartbeat: extend held leases (at most 1024); report lost ones (all of them if the
        worker is lost)."""
        k = self.keys
        args: list[Any] = [self.prefix, worker_id, self.settings.lease_ttl_ms, self.gap_ms,
                           self.maxlen, REAP_LIMIT]
        for lease in leases:
            args += [lease.task_id, lease.lease_gen, lease.attempt_id]
        if len(args) - 6 > 3 * MAX_RENEW_LEASES:
            raise errors.InputError(f"a worker renews at most {MAX_RENEW_LEASES} leases")
        code, now_ms, lost, reasons = self.caller.run(
            "renew",
            [k.worker(worker_id), k.leases(), k.alive(), k.inflight(), k.failed(),
             k.finished(), k.meta(), k.events()], args)
        return RenewResult(lost=list(lost), now_ms=int(now_ms),
                           worker_lost=int(code) == errors.WORKER_LOST,
                           reasons=dict(zip(lost, reasons)))

    def commit_args(self, worker_id: str, lease: Lease, result_key: str, run_s: float,
                    warm: bool, meta: Mapping[str, Any] | None, inline: bytes = b"") -> list[Any]:
        """complete-11's ARGV (also complete_claim-15's ARGV[1..14])."""
        if not 0 <= run_s <= MAX_RUN_S:  # also false for NaN
            raise errors.InputError(f"run_s must be a number from 0 to {MAX_RUN_S}, not {run_s!r}")
        check_inline(inline)
        st = self.settings
        return [self.prefix, worker_id, lease.task_id, lease.lease_gen, lease.attempt_id,
                result_key, repr(float(run_s)), int(warm), st.ema_alpha,
                self.maxlen, json.dumps(dict(meta)) if meta else "{}", st.quarantine_after,
                int(st.quarantine_cooldown_s * 1000), inline]

    def complete(self, worker_id: str, lease: Lease, result_key: str, *, run_s: float,
                 warm: bool, meta: Mapping[str, Any] | None = None,
                 inline: bytes = b"") -> CompleteResult:
        """Commit a result; raises StaleResultError if the lease is no longer current.
        ``inline``: the result itself, held in Redis instead of the store (1 to
        ``MAX_INLINE_BYTES`` bytes, nova_queue/results.py; the store then holds nothing
        under ``result_key``); empty: the store holds it."""
        k = self.keys
        code, finished = self.caller.run(
            "complete",
            [k.task(lease.task_id), k.job(lease.job_id), *self.commit_keys(worker_id, lease.app)],
            self.commit_args(worker_id, lease, result_key, run_s, warm, meta, inline))
        code = int(code)
        errors.raise_for_code(code, task_id=lease.task_id)
        return CompleteResult(job_finished=bool(int(finished)), replayed=code == errors.ALREADY)

    def complete_and_claim(self, worker_id: str, lease: Lease, result_key: str, *,
                           run_s: float, warm: bool, meta: Mapping[str, Any] | None = None,
                           inline: bytes = b"",
                           app: str | None = None, k: int = 1,
                           attempt_ids: Sequence[str] | None = None,
                           ) -> tuple[CompleteResult, ClaimResult | None]:
        """``complete`` and then ``claim(worker_id, app, k)`` in one round trip (one script:
        the same fencing and policy as the two calls). ``app`` defaults to the lease's.

        Raises StaleResultError like ``complete`` when the commit is rejected (nothing is
        claimed then). The claim part is None when the worker is no longer registered:
        the commit held, and the next ``claim`` raises WorkerLostError. Retrying after a
        lost reply with the same ``attempt_ids`` returns the same leases (and ALREADY).
        """
        app = app or lease.app
        claim = self.claim_args(app, k, attempt_ids).for_every_id()
        keys = self.keys
        res = self.caller.run(
            "complete_claim",
            [keys.task(lease.task_id), keys.job(lease.job_id),
             *self.commit_keys(worker_id, lease.app), *self.next_claim_keys(app)],
            [*self.commit_args(worker_id, lease, result_key, run_s, warm, meta, inline),
             *claim.argv()])
        code = int(res[0])
        errors.raise_for_code(code, task_id=lease.task_id)
        done = CompleteResult(job_finished=bool(int(res[1])), replayed=code == errors.ALREADY)
        claim_code = int(res[2])
        if claim_code == errors.WORKER_LOST:
            return done, None
        return done, self.claim_result(app, claim_code, int(res[3]), res[4], *res[5:6])

    def fail(self, worker_id: str, lease: Lease, kind: str, message: str = "", *,
             batch: int = 1) -> FailResult:
        """Report a failed run: ``kind`` is ``error`` or ``oom`` (an attempt is used, unless
        the worker is quarantined), or ``shutdown`` or ``infra`` (the worker or a dependency
        failed: no attempt is used), or ``prepare`` (the worker could not prepare the job: no
        attempt is used, and the worker is not offered jobs of its app and model for
        ``cannot_run_s``), or ``invalid`` (its output failed the app's ``validate``: as
        ``prepare``, and it counts as one of the worker's failures). ``prepare`` and
        ``invalid`` are free at most 3 times per task. ``batch``: how many tasks the failed
        run held (after ``oom``, a smaller batch may fit). State ``leased``: the task's other
        attempt runs on."""
        k, st = self.keys, self.settings
        code, state = self.caller.run(
            "fail",
            [k.task(lease.task_id), k.job(lease.job_id), k.worker(worker_id), k.held(worker_id),
             k.pending(lease.app), k.leases(), k.inflight(), k.failed(), k.finished(),
             k.events()],
            [self.prefix, worker_id, lease.task_id, lease.lease_gen, lease.attempt_id, kind,
             message[:MAX_ERROR_CHARS], self.maxlen, st.quarantine_fast_fails,
             int(st.quarantine_fast_s * 1000), int(st.quarantine_cooldown_s * 1000),
             max(1, min(int(batch), MAX_CLAIM_K)), int(st.cannot_run_s * 1000)])
        errors.raise_for_code(int(code), task_id=lease.task_id, detail=str(state))
        return FailResult(requeued=state == "pending", state=str(state))

    def note_loaded(self, worker_id: str, app: str, model: str, load_s: float) -> int:
        """The worker loaded ``model`` for ``app`` in ``load_s``: it holds it warm now (claims
        prefer that model's jobs for it). Returns how many loads it did."""
        k = self.keys
        code, loads = self.caller.run(
            "loaded", [k.worker(worker_id), k.alive(), k.events(), k.meta()],
            [self.prefix, worker_id, app, model, repr(max(0.0, min(float(load_s), MAX_RUN_S))),
             self.settings.ema_alpha, self.maxlen])
        errors.raise_for_code(int(code), detail="worker not registered")
        return int(loads)

    def note_loading(self, worker_id: str, app: str, model: str, *, start: bool = True) -> int:
        """The worker starts loading ``model`` for ``app`` (``enqueue --wait`` and the demo
        show it: :mod:`nova_queue.loads`), or (``start=False``) is no longer loading it
        without a load to record (prepare loaded nothing, or failed); returns when it
        started (Redis ms; 0 for a stop)."""
        k = self.keys
        code, started_ms = self.caller.run(
            "loading", [k.worker(worker_id), k.alive(), k.events(), k.meta()],
            [self.prefix, worker_id, app, model, "start" if start else "stop", self.maxlen])
        errors.raise_for_code(int(code), detail="worker not registered")
        return int(started_ms)

    def reap(self, limit: int = REAP_LIMIT) -> dict[str, int]:
        """Requeue expired leases and lost workers' tasks now (claims also do it lazily)."""
        k = self.keys
        _, workers, leases, deleted = self.caller.run(
            "reap", [k.leases(), k.alive(), k.inflight(), k.failed(), k.finished(), k.meta(),
                     k.events(), k.staging()],
            [self.prefix, self.settings.lease_ttl_ms, self.gap_ms, self.maxlen, limit,
             STAGING_ABANDONED_MS])
        return {"workers_lost": int(workers), "leases_expired": int(leases),
                "staged_deleted": int(deleted)}


def check_worker_id(worker_id: str) -> None:
    """Raise InputError unless ``worker_id`` matches :data:`~nova_queue.keys.WORKER_ID_RE`."""
    if not isinstance(worker_id, str) or not WORKER_ID_RE.match(worker_id):
        raise errors.InputError(f"invalid worker id {worker_id!r}: use 1 to 128 letters, digits, "
                                "'_', '.' or '-'")


def _candidates(raw: Any) -> dict[str, str] | None:
    """A verification lease's candidates (``{"cand": key, "cand2": key}``, nulls dropped),
    or None for a plain lease."""
    if not isinstance(raw, Mapping):
        return None
    return {k: v for k, v in raw.items() if k in ("cand", "cand2") and isinstance(v, str)}
