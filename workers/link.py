"""The worker's link to a gateway (``nova-queue worker --gateway URL --token T``).

:class:`GatewayLink` is the worker's transport
(:class:`~nova_queue.workers.transport.WorkerTransport`) through ``nova-queue gateway``: the
calls the direct client makes (register, claim, renew, complete, complete and claim, a batch
of commits, fail, loading, loaded, deregister) as JSON over HTTP(S), and results sent to the
gateway, which writes each under exactly its attempt's write-once key. So the same runtime,
claims, executor, heartbeat, batched commits, backups, time limits and quarantine run in
both modes, and a worker behind a gateway holds no Redis or store credentials and only
makes outbound requests. A result travels with its commit: ``upload`` keeps it, and the
commit sends it in the same request (one raw body: the commit's JSON, then the result's
bytes; a batch's JSON, then its results: :mod:`nova_queue.wire`), so a run of tasks costs
one request, as it costs one script in direct mode; a retried commit sends it again, and
the gateway finds its own earlier write. A gateway of an earlier release (its ``hello``
does not offer ``complete_batch``) gets a batch's commits one at a time.

Errors keep the runtime's meaning (``gateway_http.py``): an unreachable gateway is
:class:`~nova_queue.workers.gateway_http.GatewayUnreachable`, a
:class:`redis.ConnectionError`, so every retry path of the direct worker (claims in doubt,
commit retries, the next heartbeat, the loop's back-off) applies unchanged; a rejected
commit is a StaleResultError; a 401 (token unknown or revoked) a
:class:`~nova_queue.errors.TokenError`, which stops the worker.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from nova_queue import __version__, dist, errors, protocol, wire
from nova_queue.client import BatchCommit, BatchResult
from nova_queue.limits import MAX_CLAIM_K
from nova_queue.models import ClaimResult, CompleteResult, FailResult, Lease, RenewResult
from nova_queue.settings import Settings
from nova_queue.workers import scheme
from nova_queue.workers.gateway_http import GatewayHTTP, GatewayUnreachable
from nova_queue.workers.redis_wait import wait_for_redis

if TYPE_CHECKING:
    from nova_queue.workers.transport import Hello

log = logging.getLogger(__name__)

#: How long a claim may wait at the gateway for work (its long poll), in ms.
CLAIM_WAIT_MS = 2000
#: Results kept for commits not yet sent; past it the oldest (a commit given up) goes. A
#: run holds at most as many uploaded results before it commits them (``workers/outputs.py``).
MAX_STAGED = MAX_CLAIM_K


class GatewayLink:
    """The worker calls, through a gateway. Thread-safe: one HTTP session per thread."""

    def __init__(self, settings: Settings):
        if not settings.worker_token:
            raise errors.ConfigError("a worker with --gateway needs its token: --token or "
                                     "NOVA_WORKER_TOKEN ('nova-queue tokens create NAME')")
        url = settings.gateway_url.rstrip("/")
        if not url.startswith(("https://", "http://")):
            raise errors.ConfigError(f"gateway URL {url!r} must start with https:// (or "
                                     "http:// on a trusted network)")
        self.url = url
        self.settings = settings
        #: every result goes up with its commit's request (the gateway stores it): none inline
        self.inline_limit = 0
        #: requests to the gateway (one session per thread), its answers as errors
        self.http = GatewayHTTP(url, settings)
        #: the largest result the gateway accepts, and whether it takes batched commits
        #: (``hello``; a gateway of an earlier release does not)
        self.max_result_bytes = 0
        self.batches = False
        #: results put and not yet committed: key -> (bytes, content type, metadata)
        self._staged: dict[str, tuple[bytes, str, dict[str, str]]] = {}
        self._staged_lock = threading.Lock()

    @property
    def worker_id(self) -> str:
        """The worker id the gateway gave this process (``hello``; sent with every call)."""
        return self.http.worker_id

    # ---- joining --------------------------------------------------------------------------
    def hello(self, stop: threading.Event) -> Hello | None:
        """Wait until the gateway answers (None if stopped first), check the protocol, and
        get this process's worker id and the pool's lease timing (the gateway's answer)."""
        scheme.check_before_joining(self.url)
        answer: dict[str, Any] = {}
        probed = []

        def once() -> None:
            try:
                answer.update(self.http.post("/v1/hello", {"protocol": protocol.PROTOCOL,
                                                           "nova": __version__}))
            except (GatewayUnreachable, errors.NovaError) as exc:
                # no answer, or not a gateway's: an https-only gateway behind an http:// URL?
                if not probed and (isinstance(exc, GatewayUnreachable)
                                   or type(exc) is errors.NovaError):
                    probed.append(True)
                    scheme.check_after_failure(self.url)
                raise

        if not wait_for_redis(once, self.url, stop, what="the gateway"):
            return None
        self.http.worker_id = str(answer["worker_id"])
        self.max_result_bytes = int(answer.get("max_result_bytes") or 0)
        self.batches = bool(answer.get("complete_batch"))
        self._check_release(str(answer.get("nova") or ""))
        return answer  # type: ignore[return-value] - the gateway's JSON: a Hello and more

    def _check_release(self, theirs: str) -> None:
        """Say so when this worker runs another release than its gateway (it still joins:
        releases of one protocol work together, and refusing would stop every worker at
        the moment its gateway is upgraded; the protocol check refuses what cannot work)."""
        if theirs and theirs != __version__:
            log.warning("this worker runs nova-queue %s but its gateway runs %s: install the "
                        "gateway's release with  pip install 'nova-queue @ %s/v1/dist/%s'  and "
                        "start the worker again (joining meanwhile: both speak protocol %d)",
                        __version__, theirs, self.url, dist.wheel_name(theirs),
                        protocol.PROTOCOL)

    def register_worker(self, worker_id: str, fields: Mapping[str, Any], apps: Iterable[str],
                        bench: Mapping[str, Mapping[str, float | None]] | None = None) -> bool:
        """Join the fleet (or re-join) as the token's worker."""
        res = self.http.post("/v1/register", {"fields": dict(fields), "apps": list(apps),
                                              "bench": dict(bench or {})})
        return bool(res["rejoined"])

    def deregister_worker(self, worker_id: str) -> int:
        """Leave the fleet; leases still held return to pending."""
        return int(self.http.post("/v1/deregister", {})["released"])

    # ---- waiting for work -----------------------------------------------------------------
    def event_mark(self) -> str | None:
        """None: the gateway's claim waits for work itself (a long poll)."""
        return None

    def wait_for_work(self, after: str | None, wait_s: float, stop: threading.Event) -> None:
        """The claim waited at the gateway already; its hint is what is left: sleep it."""
        stop.wait(wait_s)

    # ---- the fenced calls -----------------------------------------------------------------
    def claim(self, worker_id: str, app: str, k: int = 1,
              attempt_ids: Sequence[str] | None = None) -> ClaimResult:
        """Lease up to ``k`` tasks of ``app``; the gateway waits up to CLAIM_WAIT_MS for work."""
        ids = _attempt_ids(attempt_ids, k)
        res = self.http.post("/v1/claim", {"app": app, "attempt_ids": ids,
                                           "wait_ms": CLAIM_WAIT_MS},
                             extra_s=CLAIM_WAIT_MS / 1000)
        return wire.claim_from_json(res)

    def renew(self, worker_id: str, leases: Iterable[Lease]) -> RenewResult:
        """Heartbeat: extend held leases; report lost ones."""
        body = {"leases": [[x.task_id, x.lease_gen, x.attempt_id] for x in leases]}
        return wire.renew_from_json(self.http.post("/v1/renew", body))

    def complete(self, worker_id: str, lease: Lease, result_key: str, *, run_s: float,
                 warm: bool, meta: Mapping[str, Any] | None = None,
                 inline: bytes = b"") -> CompleteResult:
        """Commit a result the gateway stored; StaleResultError if the lease is not current."""
        _no_inline(inline)
        res = self._send_commit(self._commit_body(lease, result_key, run_s, warm, meta))
        return CompleteResult(job_finished=bool(res["job_finished"]),
                              replayed=bool(res["replayed"]))

    def complete_and_claim(self, worker_id: str, lease: Lease, result_key: str, *,
                           run_s: float, warm: bool, meta: Mapping[str, Any] | None = None,
                           inline: bytes = b"", app: str | None = None, k: int = 1,
                           attempt_ids: Sequence[str] | None = None,
                           ) -> tuple[CompleteResult, ClaimResult | None]:
        """``complete`` and the next claim in one request (one script at the gateway)."""
        _no_inline(inline)
        body = self._commit_body(lease, result_key, run_s, warm, meta)
        body["next"] = {"app": app or lease.app, "attempt_ids": _attempt_ids(attempt_ids, k)}
        res = self._send_commit(body)
        done = CompleteResult(job_finished=bool(res["job_finished"]),
                              replayed=bool(res["replayed"]))
        claimed = res.get("claimed")
        return done, (wire.claim_from_json(claimed) if claimed is not None else None)

    @staticmethod
    def _commit_body(lease: Lease, key: str, run_s: float, warm: bool,
                     meta: Mapping[str, Any] | None) -> dict[str, Any]:
        return {"lease": _fence(lease), "key": key, "run_s": run_s, "warm": bool(warm),
                "meta": dict(meta or {})}

    def complete_batch(self, worker_id: str, commits: Sequence[BatchCommit], *,
                       app: str | None = None, k: int = 1,
                       attempt_ids: Sequence[str] | None = None) -> BatchResult:
        """Commit up to 64 kept results, each fenced and answered on its own, in as few
        ``/v1/complete_batch`` requests as the gateway's limits allow
        (:func:`~nova_queue.wire.batch_bodies`: one, unless the results are large); with
        ``app``, the last request also claims.
        A retry after a lost reply sends them again: the commits that held are replayed."""
        if not 1 <= len(commits) <= MAX_CLAIM_K:
            raise ValueError(f"a batch commits 1 to {MAX_CLAIM_K} results")
        after = None
        if app is not None:
            if not 1 <= k <= MAX_CLAIM_K:
                raise ValueError(f"k must be from 1 to {MAX_CLAIM_K}")
            after = {"app": app, "attempt_ids": _attempt_ids(attempt_ids, k)}
        if not self.batches:
            return self._one_by_one(commits, after)
        answers: list[CompleteResult | errors.NovaError] = []
        claimed = None
        sent = 0
        for n, head_bytes, body in wire.batch_bodies(
                [self._batch_entry(c) for c in commits], after, self.max_result_bytes):
            res = self._send_batch(body, head_bytes)
            part, sent = commits[sent:sent + n], sent + n
            answers += [wire.commit_answer_from_json(a, c.lease.task_id)
                        for a, c in zip(res["results"], part, strict=True)]
            for c in part:  # answered: committed, or refused (its object deleted)
                self.discard(c.result_key)
            if res.get("claimed") is not None:
                claimed = wire.claim_from_json(res["claimed"])
        return BatchResult(answers, claimed)

    def _one_by_one(self, commits: Sequence[BatchCommit], after: Mapping[str, Any] | None
                    ) -> BatchResult:
        """A batch through a gateway without ``complete_batch`` (an earlier release): each
        commit alone, the last with the claim; answered as a batch is."""
        answers: list[CompleteResult | errors.NovaError] = []
        claimed = None
        for i, c in enumerate(commits):
            try:
                if after is not None and i == len(commits) - 1:
                    done, claimed = self.complete_and_claim(
                        self.worker_id, c.lease, c.result_key, run_s=c.run_s, warm=c.warm,
                        meta=c.meta, app=after["app"], attempt_ids=after["attempt_ids"])
                else:
                    done = self.complete(self.worker_id, c.lease, c.result_key,
                                         run_s=c.run_s, warm=c.warm, meta=c.meta)
            except (errors.StaleResultError, errors.TaskNotFoundError, errors.InputError,
                    errors.AccessDeniedError) as exc:  # refused: this commit alone
                answers.append(exc)
                continue
            answers.append(done)
        return BatchResult(answers, claimed)

    def _batch_entry(self, c: BatchCommit) -> tuple[dict[str, Any], bytes]:
        """A commit's entry in a batch, and its kept result."""
        data, content_type, meta = self._kept(c.result_key)
        return {"commit": self._commit_body(c.lease, c.result_key, c.run_s, c.warm, c.meta),
                "content_type": content_type, "metadata": meta}, data

    def _send_batch(self, body: bytes, head_bytes: int) -> dict[str, Any]:
        """POST one batch (its JSON, then its results); a store failure at the gateway
        counts as unreachable, as for one commit."""
        try:
            return self.http.post("/v1/complete_batch", data=body, headers={
                "Content-Type": wire.COMMIT_TYPE, wire.COMMIT_LENGTH_HEADER: str(head_bytes)})
        except errors.StoreError as exc:
            raise GatewayUnreachable(f"the gateway could not store the results: {exc}") from None

    def fail(self, worker_id: str, lease: Lease, kind: str, message: str = "", *,
             batch: int = 1) -> FailResult:
        """Report a failed run (``error``, ``oom``, ``shutdown``, ``infra`` or ``prepare``)."""
        res = self.http.post("/v1/fail", {"lease": _fence(lease), "kind": kind,
                                          "message": message[:2000], "batch": batch})
        return FailResult(requeued=bool(res["requeued"]), state=str(res["state"]))

    def note_loaded(self, worker_id: str, app: str, model: str, load_s: float) -> int:
        """The worker loaded ``model`` for ``app`` in ``load_s`` (it holds it warm now)."""
        return int(self.http.post("/v1/loaded", {"app": app, "model": model,
                                                 "load_s": float(load_s)})["loads"])

    def note_loading(self, worker_id: str, app: str, model: str, *, start: bool = True) -> int:
        """The worker starts (or stops) loading ``model`` for ``app``."""
        return int(self.http.post("/v1/loading", {"app": app, "model": model,
                                                  "start": bool(start)})["started_ms"])

    # ---- results --------------------------------------------------------------------------
    def upload(self, key: str, data: bytes, content_type: str,
               metadata: Mapping[str, str]) -> None:
        """Keep a result until its commit sends it (ResultTooLargeError past the gateway's
        limit, before anything is sent): the gateway writes it under ``key`` only if this
        worker holds that attempt, so an earlier upload of the attempt is its own."""
        if self.max_result_bytes and len(data) > self.max_result_bytes:
            raise errors.ResultTooLargeError(
                f"the result is {len(data)} bytes; the gateway accepts {self.max_result_bytes}")
        with self._staged_lock:
            while len(self._staged) >= MAX_STAGED:  # commits given up on: forget the oldest
                self._staged.pop(next(iter(self._staged)))
            self._staged[key] = (data, content_type, dict(metadata or {}))

    #: A gateway worker verifies others' results: it fetches them from the gateway.
    verifies = True

    def candidate(self, lease: Lease, slot: str) -> bytes:
        """The result ``slot`` (``cand`` or ``cand2``) that ``lease``, a verification this
        worker holds, is compared with: the gateway serves it to the lease's holder only
        (``POST /v1/candidate``). ObjectNotFoundError when it cannot (the lease is not held
        any more, the candidate is gone, the gateway is unreachable): no verdict then."""
        try:
            return self.http.fetch("/v1/candidate", {"lease": _fence(lease), "slot": slot})
        except (errors.NovaError, GatewayUnreachable) as exc:
            raise errors.ObjectNotFoundError(f"{lease.task_id} {slot}: {exc}") from None

    def verification(self, lease: Lease) -> dict[str, str] | None:
        """The task's candidates, when ``lease`` (held by this worker) verifies them
        (``POST /v1/verification``)."""
        found = self.http.post("/v1/verification", {"lease": _fence(lease)}).get("verify")
        if not isinstance(found, dict):
            return None
        return {str(k): str(v) for k, v in found.items() if k in ("cand", "cand2")}

    def discard(self, key: str) -> None:
        """Forget a kept result (the gateway deletes an object it wrote for a commit it
        refused itself)."""
        with self._staged_lock:
            self._staged.pop(key, None)

    def _kept(self, key: str) -> tuple[bytes, str, dict[str, str]]:
        """The kept result of ``key`` (gone only after MAX_STAGED commits were given up:
        unreachable, so that its lease expires)."""
        with self._staged_lock:
            kept = self._staged.get(key)
        if kept is None:
            raise GatewayUnreachable(f"the result of {key} is no longer kept")
        return kept

    def _send_commit(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST a commit with its kept result: one raw body, the commit's JSON then the
        result's bytes (``web/gateway/commits.py``). A store failure at the gateway
        counts as unreachable: the executor retries the commit."""
        data, content_type, meta = self._kept(body["key"])
        head = json.dumps({"commit": body, "content_type": content_type,
                           "metadata": meta}).encode()
        try:
            res = self.http.post("/v1/complete", data=head + data, headers={
                "Content-Type": wire.COMMIT_TYPE, wire.COMMIT_LENGTH_HEADER: str(len(head)),
                wire.COMMIT_TASK_HEADER: body["lease"]["task_id"]})
        except errors.StaleResultError:
            self.discard(body["key"])
            raise
        except errors.StoreError as exc:
            raise GatewayUnreachable(f"the gateway could not store the result: {exc}") from None
        self.discard(body["key"])
        return res

    def close(self) -> None:
        """Close this thread's HTTP session."""
        self.http.close()


def _attempt_ids(attempt_ids: Sequence[str] | None, k: int) -> list[str]:
    """A claim's attempt ids: those given (one task each, as the direct client claims),
    else ``k`` new ones."""
    return list(attempt_ids) if attempt_ids else [secrets.token_hex(8) for _ in range(k)]


def _fence(lease: Lease) -> dict[str, Any]:
    return {name: getattr(lease, name) for name in wire.FENCE_FIELDS}


def _no_inline(inline: bytes) -> None:
    """The link's :attr:`inline_limit` is 0: a caller never hands it an inline result."""
    if inline:
        raise ValueError("a gateway link carries results with their commit requests, "
                         "never inline")
