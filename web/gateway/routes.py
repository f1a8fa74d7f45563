"""The worker protocol over HTTP: ``POST /v1/<call>`` with a JSON body, each call one of the
direct worker's (``nova_queue.client.worker``) made as the token's worker.

The gateway, not the worker, decides who is calling: ``hello`` gives the token's process a
worker id (``<token name>.<12 hex>``; the token's previous process is deregistered, its
leases released), and every later call acts as that id, so a lease of another worker fails
the scripts' own fence (403, ``stale_rejected`` in the event stream). A token's apps limit
what its worker may register and claim; its labels are pinned onto the worker's, and a
custom label the token does not grant is refused: requirements are checked against labels
the pool's owner vouched for. ``claim`` long-polls: with nothing to claim it waits, as the
direct worker does (:mod:`nova_queue.wake`), up to ``wait_ms`` (at most 10 s), and claims
again when work arrives. The commits, which carry their results (``complete``,
``complete_batch``), are in :mod:`~nova_queue.web.gateway.commits`.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request

from nova_queue import __version__, errors, protocol, wake, wire
from nova_queue.keys import ATTEMPT_ID_RE
from nova_queue.limits import MAX_CLAIM_K
from nova_queue.models import ClaimResult, Lease
from nova_queue.placement import AUTOMATIC_LABELS, labels_from_json
from nova_queue.web.gateway import results
from nova_queue.web.gateway.auth import Caller, authenticate, set_if_exists

bp = Blueprint("gateway", __name__, url_prefix="/v1")

#: Longest wait of a long-polled claim.
MAX_CLAIM_WAIT_MS = 10_000
#: Labels every worker reports about itself (and ``app.<name>``); any other label of a
#: worker behind a gateway must be one its token grants.
SELF_REPORTED = frozenset(AUTOMATIC_LABELS)
FAIL_KINDS = ("error", "oom", "shutdown", "infra", "prepare", "invalid")
#: Largest JSON body of a call other than a commit (a renewal of 512 leases is ~30 KB).
MAX_JSON_BYTES = 1024 * 1024


def gateway_state():
    """The gateway's :class:`~nova_queue.web.gateway.app.GatewayState`: client, store, settings."""
    return current_app.extensions["nova_gateway"]


def json_body() -> dict[str, Any]:
    """The request's JSON object (read after its token is checked), or 400; 413 past
    :data:`MAX_JSON_BYTES`, unread."""
    if not request.is_json:
        raise errors.InputError("expected a JSON object (Content-Type: application/json)")
    if (request.content_length or 0) > MAX_JSON_BYTES:
        raise errors.ResultTooLargeError(f"a JSON body is at most {MAX_JSON_BYTES} bytes")
    return results.parse_json(request.get_data(), "the request's JSON")


def attempt_ids(raw: object) -> list[str]:
    """A claim's attempt ids (1 to 64, each well formed), else 400."""
    if (not isinstance(raw, list) or not 1 <= len(raw) <= MAX_CLAIM_K
            or not all(isinstance(x, str) and ATTEMPT_ID_RE.match(x) for x in raw)):
        raise errors.InputError(f"attempt_ids: a list of 1 to {MAX_CLAIM_K} attempt ids")
    return raw


def registered_app(caller: Caller, app: object) -> str:
    """``app`` if this worker registered it (and so its token allows it), else 403."""
    if not isinstance(app, str) or app not in caller.token.registered:
        raise errors.AccessDeniedError(f"app {app!r} is not one this worker registered")
    return app


@bp.post("/hello")
def hello() -> Any:
    """Check the worker's protocol and give its process a worker id."""
    caller = authenticate(need_worker=False)
    theirs = json_body().get("protocol")
    state = gateway_state()
    if theirs != protocol.PROTOCOL:
        raise errors.ConfigError(f"this worker speaks protocol {theirs!r} but the gateway "
                                 f"speaks protocol {protocol.PROTOCOL}: run one release on both")
    protocol.check(state.client.redis, state.client.keys)
    worker_id = f"{caller.token.name}.{secrets.token_hex(6)}"
    key = state.client.keys.token(caller.token.digest)
    if not set_if_exists(state.client.redis, key, {"worker": worker_id, "registered": ""}):
        raise errors.TokenError("unknown or revoked worker token")
    if caller.token.worker:  # the token's previous process: its leases go back now
        state.client.deregister_worker(caller.token.worker)
    st = state.settings
    return jsonify({"worker_id": worker_id, "protocol": protocol.PROTOCOL, "nova": __version__,
                    "lease_ttl_s": st.lease_ttl_s, "heartbeat_interval_s": st.heartbeat_interval_s,
                    "max_result_bytes": st.gateway_max_result_bytes,
                    "complete_batch": True})  # an earlier release's link commits one by one


@bp.post("/register")
def register() -> Any:
    """Join (or re-join) the fleet with the token's apps and labels."""
    caller = authenticate()
    body, state = json_body(), gateway_state()
    apps, fields, bench = body.get("apps"), body.get("fields"), body.get("bench", {})
    if (not isinstance(apps, list) or not apps or not isinstance(fields, dict)
            or not isinstance(bench, dict)
            or not all(isinstance(b, dict) for b in bench.values())):
        raise errors.InputError("register: needs apps (a list), fields (an object) and "
                                "bench (an object of objects)")
    for app in apps:
        if not caller.token.allows_app(str(app)):
            raise errors.AccessDeniedError(f"token {caller.token.name!r} does not allow app "
                                           f"{app!r}")
    # the token's trust, owner and price, not the worker's word; every gateway worker
    # verifies others' results (it fetches them with POST /v1/candidate), one that is not
    # trusted only those of other tokens and owners, never with the last word (SECURITY.md)
    fields = {**fields, "labels": json.dumps(_pinned_labels(caller, fields.get("labels")),
                                             sort_keys=True), "token": caller.token.name,
              "trust": caller.token.trust, "owner": caller.token.owner, "verifier": "1",
              "price": caller.token.cost_per_hour}
    rejoined = state.client.register_worker(caller.worker_id, fields, [str(a) for a in apps],
                                            bench)
    set_if_exists(state.client.redis, state.client.keys.token(caller.token.digest),
                  {"registered": ",".join(str(a) for a in apps)})
    return jsonify({"rejoined": rejoined})


def _pinned_labels(caller: Caller, raw: object) -> dict[str, str]:
    """The worker's labels: what it reports about itself, then the token's; a custom label
    the token does not grant, or a report of its own that contradicts one the token pins
    (the token says ``backend=cuda``, the worker ``cpu``), is refused."""
    labels = labels_from_json(raw if isinstance(raw, str) else json.dumps(raw or {}))
    granted = caller.token.labels
    for key, value in labels.items():
        own = key in SELF_REPORTED or key.startswith("app.")
        if granted.get(key, value if own else None) != value:
            raise errors.AccessDeniedError(f"label {key}={value} is not granted by token "
                                           f"{caller.token.name!r}")
    return {**labels, **granted}


@bp.post("/claim")
def claim() -> Any:
    """Lease up to ``len(attempt_ids)`` tasks; with nothing to claim, wait for work."""
    caller = authenticate()
    body, state = json_body(), gateway_state()
    app, ids = registered_app(caller, body.get("app")), attempt_ids(body.get("attempt_ids"))
    try:
        wait_ms = max(0, min(int(body.get("wait_ms") or 0), MAX_CLAIM_WAIT_MS))
    except (TypeError, ValueError, OverflowError):
        raise errors.InputError("claim: wait_ms must be a number") from None
    mark = wake.event_mark(state.client) if wait_ms else None
    res = state.client.claim(caller.worker_id, app, len(ids), attempt_ids=ids)
    if res.status in ("wait", "empty") and wait_ms:
        wake.wait_for_work(state.client, mark, min(res.retry_after_s, wait_ms / 1000))
        res = state.client.claim(caller.worker_id, app, len(ids), attempt_ids=ids)
        if res.status in ("wait", "empty"):  # waited its hint here: ask again at once
            res = ClaimResult(res.status, [], 0.0, res.now_ms, res.reason)
    return jsonify(wire.claim_to_json(res))


@bp.post("/renew")
def renew() -> Any:
    """Heartbeat: extend the leases listed (``[[task_id, lease_gen, attempt_id], ...]``)."""
    caller = authenticate()
    raw = json_body().get("leases")
    if not isinstance(raw, list):
        raise errors.InputError("renew: leases must be a list")
    leases = [wire.fenced_lease({"task_id": x[0], "lease_gen": x[1], "attempt_id": x[2],
                                 "app": ""}) for x in raw if isinstance(x, list) and len(x) == 3]
    if len(leases) != len(raw):
        raise errors.InputError("renew: each lease is [task_id, lease_gen, attempt_id]")
    return jsonify(wire.renew_to_json(gateway_state().client.renew(caller.worker_id, leases)))


@bp.post("/fail")
def fail() -> Any:
    """Report a failed run of a lease this worker holds."""
    caller = authenticate()
    body = json_body()
    lease = wire.fenced_lease(body.get("lease"))
    registered_app(caller, lease.app)
    kind = body.get("kind")
    if kind not in FAIL_KINDS:
        raise errors.InputError(f"fail: kind must be one of {', '.join(FAIL_KINDS)}")
    try:
        batch = int(body.get("batch") or 1)
    except (TypeError, ValueError, OverflowError):
        raise errors.InputError("fail: batch must be a number") from None
    res = gateway_state().client.fail(caller.worker_id, lease, kind, str(body.get("message", "")),
                               batch=batch)
    return jsonify({"requeued": res.requeued, "state": res.state})


@bp.post("/candidate")
def candidate() -> Any:
    """The result a verification lease this worker holds is compared with (``slot``: cand,
    or cand2 for a second opinion): held inline in Redis, else the store's object under the
    task's key. 403 unless the caller holds that lease now; 404 when there is no such
    candidate."""
    body = json_body()
    slot = body.get("slot")
    if slot not in ("cand", "cand2"):
        raise errors.InputError("candidate: slot must be cand or cand2")
    state, lease = gateway_state(), _held_lease(body)
    data = results.candidate(state, lease.task_id, slot)
    if data is None:
        raise errors.TaskNotFoundError(f"{lease.task_id}: no result {slot} to verify")
    return Response(data, mimetype="application/octet-stream")


@bp.post("/verification")
def verification() -> Any:
    """The candidates a lease this worker holds verifies (``{"verify": {"cand": key}}``), or
    ``{"verify": null}``: a backup attempt that became the verification of the result the
    other attempt committed first asks before it commits (a free sample). 403 unless the
    caller holds the lease."""
    state, lease = gateway_state(), _held_lease(json_body())
    cand, cand2 = state.client.redis.hmget(state.client.keys.task(lease.task_id),
                                           ["cand", "cand2"])
    found = {"cand": cand, **({"cand2": cand2} if cand2 else {})} if cand else None
    return jsonify({"verify": found})


def _held_lease(body: dict[str, Any]) -> Lease:
    """The body's ``lease``, which the caller must hold now (403 if not)."""
    lease = wire.fenced_lease(body.get("lease"))
    caller = authenticate(task_id=lease.task_id)
    if not results.holds(gateway_state(), caller, lease):
        raise errors.AccessDeniedError(f"{lease.task_id} g{lease.lease_gen} is not this "
                                       "worker's lease")
    return lease


@bp.post("/loaded")
def loaded() -> Any:
    """The worker holds ``model`` of ``app`` warm now."""
    caller = authenticate()
    body = json_body()
    app, model = registered_app(caller, body.get("app")), str(body.get("model", ""))[:256]
    try:
        load_s = float(body.get("load_s", 0.0))
    except (TypeError, ValueError, OverflowError):
        raise errors.InputError("loaded: load_s must be a number") from None
    loads = gateway_state().client.note_loaded(caller.worker_id, app, model, load_s)
    return jsonify({"loads": loads})


@bp.post("/loading")
def loading() -> Any:
    """The worker starts (``start`` true) or stops loading ``model`` of ``app``."""
    caller = authenticate()
    body = json_body()
    app, model = registered_app(caller, body.get("app")), str(body.get("model", ""))[:256]
    started = gateway_state().client.note_loading(caller.worker_id, app, model,
                                           start=body.get("start") is not False)
    return jsonify({"started_ms": started})


@bp.post("/deregister")
def deregister() -> Any:
    """Leave the fleet; leases still held return to pending."""
    caller = authenticate()
    return jsonify({"released": gateway_state().client.deregister_worker(caller.worker_id)})
