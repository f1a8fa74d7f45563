"""The worker's link to a gateway (``nova-queue worker --gateway URL --token T``).

:class:`GatewayLink` answers the calls the worker runtime makes of a
:class:`~nova_queue.client.NovaClient` (register, claim, renew, complete, complete and
claim, fail, loading, loaded, deregister) with JSON over HTTP(S) to ``nova-queue gateway``, and
:class:`GatewayStore` is its result store: a result goes to the gateway, which writes it
under exactly that attempt's write-once key. So the same runtime, claims, executor,
heartbeat, batching, backups, time limits and quarantine run in both modes, and a worker
behind a gateway holds no Redis or store credentials and only makes outbound requests.
A result travels with its commit: ``put`` keeps it, and the commit sends it in the same
request (one raw body: the commit's JSON, then the result's bytes), so a task costs one request, as it costs one script in direct mode; a
retried commit sends it again, and the gateway finds its own earlier write.

Errors keep the runtime's meaning: an unreachable gateway (connection refused or reset, a
timeout, a 5xx) is :class:`GatewayUnreachable`, a :class:`redis.ConnectionError`, so every
retry path of the direct worker (claims in doubt, commit retries, the next heartbeat, the
loop's back-off) applies unchanged; a rejected commit is a StaleResultError; a 401 (token
unknown or revoked) a :class:`~nova_queue.errors.TokenError`, which stops the worker.
TLS certificates are always verified (``NOVA_GATEWAY_CA_BUNDLE`` names a private CA). The
token travels only in the ``Authorization`` header and is never logged.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import redis
import requests

from nova_queue import __version__, dist, errors, protocol, wire
from nova_queue.models import ClaimResult, CompleteResult, FailResult, Lease, RenewResult
from nova_queue.settings import Settings
from nova_queue.stores.base import ObjectInfo, ResultStore, StoredObject
from nova_queue.workers import scheme
from nova_queue.workers.redis_wait import wait_for_redis

log = logging.getLogger(__name__)

#: How long a claim may wait at the gateway for work (its long poll), in ms.
CLAIM_WAIT_MS = 2000
#: Connection errors retried inside one call (every call is idempotent), and the pause.
CONNECT_RETRIES = 2
CONNECT_RETRY_S = 0.25
#: 429 answers waited out inside one call before it counts as unreachable.
RATE_RETRIES = 5
MAX_RETRY_AFTER_S = 30.0
#: Results kept for commits not yet sent; past it the oldest (a commit given up) goes.
MAX_STAGED = 64
#: A commit's body: the commit's JSON (its length in the header), then the result's bytes;
#: its task id in a header, so the gateway checks the token before parsing the body
#: (``nova_queue.wire``, as the gateway's ``results.py`` reads them).
RAW_COMMIT_TYPE = wire.COMMIT_TYPE
COMMIT_LENGTH_HEADER = wire.COMMIT_LENGTH_HEADER
COMMIT_TASK_HEADER = wire.COMMIT_TASK_HEADER


class GatewayUnreachable(redis.ConnectionError):
    """The gateway cannot be reached or cannot reach Redis: the state store is unavailable
    to this worker, as a Redis outage is to a direct one (so the same retry paths apply)."""


#: error kinds the gateway answers -> what the worker raises
_KINDS: dict[str, type[Exception]] = {
    "token": errors.TokenError, "denied": errors.AccessDeniedError,
    "stale": errors.StaleResultError, "worker_lost": errors.WorkerLostError,
    "input": errors.InputError, "not_found": errors.TaskNotFoundError,
    "too_large": errors.ResultTooLargeError, "exists": errors.ObjectExistsError,
    "store": errors.StoreError, "protocol": errors.ConfigError,
}


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
        self._token = settings.worker_token
        self._verify: str | bool = settings.gateway_ca_bundle or True
        self._local = threading.local()
        #: the worker id the gateway gave this process (``hello``)
        self.worker_id = ""
        #: the largest result the gateway accepts (``hello``)
        self.max_result_bytes = 0
        #: results put and not yet committed: key -> (bytes, content type, metadata)
        self._staged: dict[str, tuple[bytes, str, dict[str, str]]] = {}
        self._staged_lock = threading.Lock()

    # ---- HTTP -----------------------------------------------------------------------------
    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = requests.Session()
            session.headers["Authorization"] = f"Bearer {self._token}"
            session.headers["User-Agent"] = f"nova-queue-worker/{__version__}"
        return session

    def _post(self, path: str, body: Mapping[str, Any] | None = None, *,
              extra_s: float = 0.0, headers: Mapping[str, str] | None = None,
              **kwargs: Any) -> dict[str, Any]:
        """POST ``body`` as JSON (or ``kwargs``: a raw ``data`` body with its ``headers``);
        the JSON answer, or the error the gateway's answer names."""
        headers = {**({"X-Nova-Worker": self.worker_id} if self.worker_id else {}),
                   **(headers or {})}
        timeout = (min(10.0, self.settings.gateway_timeout_s),
                   self.settings.gateway_timeout_s + extra_s)
        connect_tries = rate_tries = 0
        while True:
            try:
                resp = self._session().post(self.url + path, json=body, headers=headers,
                                            timeout=timeout, verify=self._verify, **kwargs)
            except requests.exceptions.SSLError as exc:
                raise errors.ConfigError(f"TLS check of the gateway {self.url} failed: {exc} "
                                         "(NOVA_GATEWAY_CA_BUNDLE names a private CA)") from None
            except requests.RequestException as exc:
                connect_tries += 1
                if connect_tries > CONNECT_RETRIES:
                    raise GatewayUnreachable(f"gateway {self.url}: {type(exc).__name__}") from None
                time.sleep(CONNECT_RETRY_S * connect_tries)
                continue
            if resp.status_code == 429 and rate_tries < RATE_RETRIES:
                rate_tries += 1
                wait_s = _retry_after(resp)
                log.warning("rate-limited by the gateway; waiting %.1f s", wait_s)
                time.sleep(wait_s)
                continue
            return _answer(resp)

    # ---- joining --------------------------------------------------------------------------
    def hello(self, stop: threading.Event) -> dict[str, Any] | None:
        """Wait until the gateway answers (None if stopped first), check the protocol, and
        get this process's worker id and the pool's lease timing."""
        scheme.check_before_joining(self.url)
        answer: dict[str, Any] = {}
        probed = []

        def once() -> None:
            try:
                answer.update(self._post("/v1/hello", {"protocol": protocol.PROTOCOL,
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
        self.worker_id = str(answer["worker_id"])
        self.max_result_bytes = int(answer.get("max_result_bytes") or 0)
        self._check_release(str(answer.get("nova") or ""))
        return answer

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
        res = self._post("/v1/register", {"fields": dict(fields), "apps": list(apps),
                                          "bench": dict(bench or {})})
        return bool(res["rejoined"])

    def deregister_worker(self, worker_id: str) -> int:
        """Leave the fleet; leases still held return to pending."""
        return int(self._post("/v1/deregister", {})["released"])

    # ---- the fenced calls -----------------------------------------------------------------
    def claim(self, worker_id: str, app: str, k: int = 1,
              attempt_ids: Sequence[str] | None = None) -> ClaimResult:
        """Lease up to ``k`` tasks of ``app``; the gateway waits up to CLAIM_WAIT_MS for work."""
        ids = list(attempt_ids or [])[:k]
        res = self._post("/v1/claim", {"app": app, "attempt_ids": ids, "wait_ms": CLAIM_WAIT_MS},
                         extra_s=CLAIM_WAIT_MS / 1000)
        return wire.claim_from_json(res)

    def renew(self, worker_id: str, leases: Iterable[Lease]) -> RenewResult:
        """Heartbeat: extend held leases; report lost ones."""
        body = {"leases": [[x.task_id, x.lease_gen, x.attempt_id] for x in leases]}
        return wire.renew_from_json(self._post("/v1/renew", body))

    def complete(self, worker_id: str, lease: Lease, result_key: str, *, run_s: float,
                 warm: bool, meta: Mapping[str, Any] | None = None) -> CompleteResult:
        """Commit a result the gateway stored; StaleResultError if the lease is not current."""
        res = self._send_commit(self._commit_body(lease, result_key, run_s, warm, meta))
        return CompleteResult(job_finished=bool(res["job_finished"]),
                              replayed=bool(res["replayed"]))

    def complete_and_claim(self, worker_id: str, lease: Lease, result_key: str, *,
                           run_s: float, warm: bool, meta: Mapping[str, Any] | None = None,
                           app: str | None = None, k: int = 1,
                           attempt_ids: Sequence[str] | None = None,
                           ) -> tuple[CompleteResult, ClaimResult | None]:
        """``complete`` and the next claim in one request (one script at the gateway)."""
        body = self._commit_body(lease, result_key, run_s, warm, meta)
        body["next"] = {"app": app or lease.app, "attempt_ids": list(attempt_ids or [])[:k]}
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

    def fail(self, worker_id: str, lease: Lease, kind: str, message: str = "", *,
             batch: int = 1) -> FailResult:
        """Report a failed run (``error``, ``oom``, ``shutdown``, ``infra`` or ``prepare``)."""
        res = self._post("/v1/fail", {"lease": _fence(lease), "kind": kind,
                                      "message": message[:2000], "batch": batch})
        return FailResult(requeued=bool(res["requeued"]), state=str(res["state"]))

    def note_loaded(self, worker_id: str, app: str, model: str, load_s: float) -> int:
        """The worker loaded ``model`` for ``app`` in ``load_s`` (it holds it warm now)."""
        return int(self._post("/v1/loaded", {"app": app, "model": model,
                                             "load_s": float(load_s)})["loads"])

    def note_loading(self, worker_id: str, app: str, model: str, *, start: bool = True) -> int:
        """The worker starts (or stops) loading ``model`` for ``app``."""
        return int(self._post("/v1/loading", {"app": app, "model": model,
                                              "start": bool(start)})["started_ms"])

    def stage(self, key: str, data: bytes, content_type: str,
              metadata: Mapping[str, str] | None) -> None:
        """Keep a result until its commit sends it (ResultTooLargeError past the gateway's
        limit, before anything is sent)."""
        if self.max_result_bytes and len(data) > self.max_result_bytes:
            raise errors.ResultTooLargeError(
                f"the result is {len(data)} bytes; the gateway accepts {self.max_result_bytes}")
        with self._staged_lock:
            while len(self._staged) >= MAX_STAGED:  # commits given up on: forget the oldest
                self._staged.pop(next(iter(self._staged)))
            self._staged[key] = (data, content_type, dict(metadata or {}))

    def unstage(self, key: str) -> None:
        """Forget a kept result (its commit was rejected)."""
        with self._staged_lock:
            self._staged.pop(key, None)

    def _send_commit(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST a commit with its kept result: one raw body, the commit's JSON then the
        result's bytes (``nova_queue/gateway/results.py``). A store failure at the gateway
        counts as unreachable: the executor retries the commit."""
        with self._staged_lock:
            staged = self._staged.get(body["key"])
        if staged is None:  # only after MAX_STAGED commits were given up: let its lease expire
            raise GatewayUnreachable(f"the result of {body['key']} is no longer kept")
        data, content_type, meta = staged
        head = json.dumps({"commit": body, "content_type": content_type,
                           "metadata": meta}).encode()
        try:
            res = self._post("/v1/complete", data=head + data, headers={
                "Content-Type": RAW_COMMIT_TYPE, COMMIT_LENGTH_HEADER: str(len(head)),
                COMMIT_TASK_HEADER: body["lease"]["task_id"]})
        except errors.StaleResultError:
            self.unstage(body["key"])
            raise
        except errors.StoreError as exc:
            raise GatewayUnreachable(f"the gateway could not store the result: {exc}") from None
        self.unstage(body["key"])
        return res

    def close(self) -> None:
        """Close this thread's HTTP session."""
        session = getattr(self._local, "session", None)
        if session is not None:
            session.close()


def _fence(lease: Lease) -> dict[str, Any]:
    return {name: getattr(lease, name) for name in wire.FENCE_FIELDS}


def _retry_after(resp: requests.Response) -> float:
    try:
        return max(0.05, min(float(resp.headers.get("Retry-After", "1")), MAX_RETRY_AFTER_S))
    except ValueError:
        return 1.0


def _answer(resp: requests.Response) -> dict[str, Any]:
    """The JSON of a 2xx answer; else the error its ``kind`` names (5xx and 429 count as
    unreachable)."""
    try:
        body = resp.json()
    except ValueError:
        body = {}
    if 200 <= resp.status_code < 300 and isinstance(body, dict):
        return body
    message = str(body.get("error", "")) if isinstance(body, dict) else ""
    message = message or f"HTTP {resp.status_code}"
    kind = str(body.get("kind", "")) if isinstance(body, dict) else ""
    if kind == "stale":
        raise errors.StaleResultError(str(body.get("task_id", "")), message)
    if kind in _KINDS and resp.status_code < 500:
        raise _KINDS[kind](message)
    if resp.status_code == 413:
        raise errors.ResultTooLargeError(message)
    if resp.status_code == 503 and kind == "protocol":
        raise errors.ConfigError(message)
    if resp.status_code >= 500 or resp.status_code == 429:
        raise GatewayUnreachable(f"gateway answered {resp.status_code}: {message}")
    raise errors.NovaError(f"gateway answered {resp.status_code}: {message}")


class GatewayStore(ResultStore):
    """The result store of a worker behind a gateway: ``put`` keeps the result for its
    commit, which sends it. The gateway writes it under the attempt's key only if the
    worker holds that attempt, and deletes the object of a commit it rejects itself, so
    ``delete`` only forgets a kept result; a worker reads no objects."""

    def __init__(self, link: GatewayLink):
        self.link = link
        self.url = link.url

    def put(self, key: str, data: bytes, content_type: str,
            metadata: Mapping[str, str] | None = None, *, overwrite: bool = False) -> None:
        self.link.stage(key, data, content_type, metadata)

    def head(self, key: str) -> ObjectInfo | None:
        return None  # an earlier put of this attempt is answered by the upload itself

    def delete(self, key: str) -> None:
        self.link.unstage(key)  # the gateway deletes an object it wrote for a rejected commit

    def get(self, key: str) -> StoredObject:
        raise errors.StoreError("a worker behind a gateway reads no objects")

    def list(self, prefix: str = "") -> Iterator[str]:
        raise errors.StoreError("a worker behind a gateway lists no objects")
