"""Commits through the gateway: ``POST /v1/complete`` (one result, sent with its commit) and
``POST /v1/complete_batch`` (up to 64 results of one worker, sent together: the worker's
link sends the results of a run of cheap tasks as the direct worker's ``complete_batch``
commits them), each optionally claiming the next tasks in the same script.

Both check everything the gateway can check before anything is written (each commit's
lease, its key, its numbers and metadata, the next claim, the results' sizes: 400, 403,
413, nothing written), then write the result of each commit whose lease this worker holds
now under that attempt's key (:mod:`~nova_queue.web.gateway.results`), then run the commit
script. A commit the scripts refuse deletes only its own result (if this worker wrote it:
:data:`~nova_queue.errors.COMMIT_REFUSALS`); a batch refused whole (one bad commit: the
script checks them all before it writes) deletes what it wrote for each, and the worker's
link commits them one at a time. A commit that held without being held at the check (a
retry after a lost reply) has its result written after the script, as with one commit.
A small result (``NOVA_INLINE_RESULT_BYTES``, nova_queue/results.py) is not stored at all:
the commit carries it, and the script writes it to Redis only if the fence holds.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from flask import Blueprint, jsonify

from nova_queue import errors, wire
from nova_queue.client import BatchCommit
from nova_queue.limits import MAX_META_BYTES, MAX_RUN_S
from nova_queue.models import Lease
from nova_queue.web.gateway import results
from nova_queue.web.gateway.auth import Caller, authenticate
from nova_queue.web.gateway.routes import attempt_ids, gateway_state, registered_app

bp = Blueprint("gateway_commits", __name__, url_prefix="/v1")


@dataclasses.dataclass(frozen=True)
class CheckedCommit:
    """A commit's fields, each checked as the commit script checks it."""

    lease: Lease
    key: str
    run_s: float
    warm: bool
    meta: dict[str, Any]
    #: the next claim: (app, attempt ids), or None
    next: tuple[str, list[str]] | None


@bp.post("/complete")
def complete() -> Any:
    """Commit a result, sent with the commit (``results.py``: a raw body, or multipart),
    and claim the next tasks with ``next``. Everything the gateway can check is checked
    before the result is written; it is written first if this worker holds the lease (if
    not, the commit script's fence refuses, 403, and counts it); a commit the scripts
    refuse deletes what it wrote."""
    upload = results.Upload.from_request()
    caller = authenticate(task_id=upload.task_hint())
    state = gateway_state()
    call = checked_commit(caller, upload.commit())
    data = upload.data(state.settings.gateway_max_result_bytes)  # 413 before any write
    if _inline(state, data):  # held in Redis by the commit itself: nothing to store or clean
        done, claimed = _commit(caller, call, data)
        return _answer(done, claimed)
    lease, key = call.lease, call.key
    held = results.holds(state, caller, lease)
    if held:
        results.store_upload(state, caller, lease, key, upload)
    try:
        done, claimed = _commit(caller, call)
    except errors.COMMIT_REFUSALS:
        if held:
            results.delete_orphan(state, caller, key)
        raise
    if not held:  # it was claimed between the check and the script: write it now
        results.store_upload(state, caller, lease, key, upload)
    return _answer(done, claimed)


def _inline(state, data: bytes) -> bool:
    """Whether a result is small enough to be held in Redis (``NOVA_INLINE_RESULT_BYTES``
    of the gateway's settings; nova_queue/results.py) rather than the store."""
    return 0 < len(data) <= state.settings.inline_result_bytes


def _answer(done, claimed) -> Any:
    return jsonify({"job_finished": done.job_finished, "replayed": done.replayed,
                    "claimed": wire.claim_to_json(claimed) if claimed is not None else None})


def checked_commit(caller: Caller, body: dict[str, Any]) -> CheckedCommit:
    """The commit's fields, or the error the scripts would answer (400, 403) before
    anything is written: lease, key, run time, metadata size and the next claim."""
    lease = wire.fenced_lease(body.get("lease"))
    registered_app(caller, lease.app)
    key = results.lease_key(lease, body.get("key"))
    try:
        run_s = float(body.get("run_s", 0.0))
    except (TypeError, ValueError, OverflowError):
        run_s = -1.0
    if not 0 <= run_s <= MAX_RUN_S:  # also false for NaN
        raise errors.InputError(f"complete: run_s must be a number from 0 to {MAX_RUN_S}")
    meta = body.get("meta") if isinstance(body.get("meta"), dict) else {}
    if len(json.dumps(meta)) > MAX_META_BYTES:
        raise errors.InputError(f"complete: meta must be at most {MAX_META_BYTES} bytes of "
                                "JSON")
    return CheckedCommit(lease, key, run_s, bool(body.get("warm")), meta,
                         _next_claim(caller, body.get("next")))


def _next_claim(caller: Caller, nxt: object) -> tuple[str, list[str]] | None:
    """The claim made after the commit (``{"app", "attempt_ids"}``), checked; or None."""
    if not isinstance(nxt, dict):
        return None
    return registered_app(caller, nxt.get("app")), attempt_ids(nxt.get("attempt_ids"))


def _commit(caller: Caller, call: CheckedCommit, inline: bytes = b""):
    """complete, or complete_and_claim with ``next``: (CompleteResult, ClaimResult|None);
    ``inline``: the result itself, held in Redis (else it is in the store under the key)."""
    client = gateway_state().client
    if call.next is not None:
        app, ids = call.next
        return client.complete_and_claim(caller.worker_id, call.lease, call.key,
                                         run_s=call.run_s, warm=call.warm, meta=call.meta,
                                         inline=inline, app=app, attempt_ids=ids)
    return client.complete(caller.worker_id, call.lease, call.key, run_s=call.run_s,
                           warm=call.warm, meta=call.meta, inline=inline), None


@bp.post("/complete_batch")
def complete_batch() -> Any:
    """Commit up to 64 results (:func:`nova_queue.wire.batch_bodies`: the batch's JSON,
    then its results), each checked, written, committed and cleaned up as ``complete``
    does one, in one script for all (``complete_batch``); with ``next``, then claim. The
    answer has one entry per commit (:func:`nova_queue.wire.commit_answer_to_json`) and
    the claim's."""
    caller = authenticate()  # before a byte of the body is read
    state = gateway_state()
    items, nxt = results.read_batch(state.settings.gateway_max_result_bytes)
    calls = [checked_commit(caller, item.commit) for item in items]
    if any(call.next is not None for call in calls):
        raise errors.InputError("complete_batch: the batch's 'next' claims, not a commit's")
    after = _next_claim(caller, nxt)
    inline = [item.data if _inline(state, item.data) else b"" for item in items]
    # a result held in Redis is written by its commit: "stored" is what this request wrote
    stored = [h and not small for h, small in zip(
        results.holders(state, caller, [call.lease for call in calls]), inline, strict=True)]
    for call, item, h in zip(calls, items, stored, strict=True):
        if h:
            results.store_result(state, caller, call.lease, call.key, item.data,
                                 item.content_type, item.metadata)
    try:
        res = state.client.complete_batch(
            caller.worker_id, [BatchCommit(c.lease, c.key, c.run_s, c.warm, c.meta, small)
                               for c, small in zip(calls, inline, strict=True)],
            app=after[0] if after else None, attempt_ids=after[1] if after else None)
    except errors.COMMIT_REFUSALS:  # refused whole: nothing committed
        for call, h in zip(calls, stored, strict=True):
            if h:
                results.delete_orphan(state, caller, call.key)
        raise
    _settle_batch(state, caller, calls, items, stored, inline, res.results)
    return jsonify({"results": [wire.commit_answer_to_json(a) for a in res.results],
                    "claimed": None if res.claimed is None else wire.claim_to_json(res.claimed)})


def _settle_batch(state, caller: Caller, calls: list[CheckedCommit], items: list,
                  stored: list[bool], inline: list[bytes], answers: list) -> None:
    """After the script: a refused commit's stored result is deleted; one committed though
    not held at the check (a retry after a lost reply) has its result stored now (one held
    in Redis was written by the script)."""
    for call, item, h, small, answer in zip(calls, items, stored, inline, answers, strict=True):
        if h and isinstance(answer, errors.COMMIT_REFUSALS):
            results.delete_orphan(state, caller, call.key)
        elif not h and not small and not isinstance(answer, errors.NovaError):
            results.store_result(state, caller, call.lease, call.key, item.data,
                                 item.content_type, item.metadata)
