"""The worker protocol's values as JSON, for the gateway (``web/gateway``) and its
client in the worker (``nova_queue.workers.link``): one definition on both sides."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any

from nova_queue import errors
from nova_queue.errors import InputError
from nova_queue.keys import ATTEMPT_ID_RE, split_task_id
from nova_queue.models import ClaimResult, CompleteResult, Lease, RenewResult

#: The lease fields a fenced call (complete, fail, upload) sends back.
FENCE_FIELDS = ("task_id", "app", "lease_gen", "attempt_id")
#: A commit's body (``POST /v1/complete``): the commit's JSON (its length in
#: :data:`COMMIT_LENGTH_HEADER`, at most :data:`MAX_COMMIT_HEAD_BYTES`), then the result's
#: bytes; :data:`COMMIT_TASK_HEADER` names the lease's task, so the gateway reads its holder
#: with the token before it parses anything (a hint: nothing is trusted from it). A batch
#: (``POST /v1/complete_batch``) is the same kind of body: its JSON (at most
#: :data:`MAX_BATCH_HEAD_BYTES`: :func:`batch_bodies`) lists each commit with its result's
#: size, and the results follow in that order. These names are the protocol's only ones:
#: the worker's link and the gateway both read them here.
COMMIT_TYPE = "application/x-nova-commit"
COMMIT_LENGTH_HEADER = "X-Nova-Commit-Length"
COMMIT_TASK_HEADER = "X-Nova-Task"
#: The longest JSON of one commit (the commit, content type and metadata).
MAX_COMMIT_HEAD_BYTES = 64 * 1024
#: The longest JSON of a batch of commits; its results together are at most the gateway's
#: ``max_result_bytes``, so a batch's body is as bounded as one commit's.
MAX_BATCH_HEAD_BYTES = 2 * MAX_COMMIT_HEAD_BYTES
#: Of a batch's JSON, what its commits may fill (the rest is the next claim's room).
BATCH_COMMITS_BYTES = MAX_BATCH_HEAD_BYTES - 4096
#: Deepest nesting of arrays and objects a request's JSON may have (the protocol's values
#: nest 3 deep; Python's parser recurses once per level and gives up near 1,000).
MAX_JSON_DEPTH = 32
_JSON_NESTING = re.compile(r'["\[\]{}]')


def json_object(raw: bytes | str, what: str) -> dict[str, Any]:
    """``raw`` parsed as a JSON object, or InputError naming ``what``: not UTF-8, not JSON
    (``NaN`` and ``Infinity`` included), not an object, or nested deeper than
    :data:`MAX_JSON_DEPTH` (checked before parsing)."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError:
        raise InputError(f"{what}: not UTF-8") from None
    if _too_deep(text):
        raise InputError(f"{what}: JSON nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        value = json.loads(text, parse_constant=_not_json)
    except (ValueError, RecursionError):
        raise InputError(f"{what}: not valid JSON") from None
    if not isinstance(value, dict):
        raise InputError(f"{what}: expected a JSON object")
    return value


def _not_json(name: str) -> Any:
    """``NaN`` and ``Infinity``, which Python's parser takes and JSON does not: refused."""
    raise ValueError(f"{name} is not JSON")


def _too_deep(text: str) -> bool:
    """Whether arrays and objects nest deeper than MAX_JSON_DEPTH outside strings: one
    pass over brackets and quotes (strings skipped by the json module's own scanner)."""
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return False
    depth, pos = 0, 0
    while (found := _JSON_NESTING.search(text, pos)) is not None:
        pos = found.end()
        char = found.group()
        if char == '"':
            try:
                pos = scanstring(text, pos)[1]
            except ValueError:  # an unterminated string: json.loads refuses the text
                return False
        elif char in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                return True
        else:
            depth -= 1
    return False


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
    except (KeyError, TypeError, ValueError, OverflowError):
        raise InputError(f"lease: needs {', '.join(FENCE_FIELDS)}") from None
    if not job or not ATTEMPT_ID_RE.match(attempt_id) or not 0 < gen < 2**53:
        raise InputError("lease: invalid task id, lease_gen or attempt id")
    return Lease(task_id=tid, job_id=job, index=index, app=app, input="", cost=1.0, params={},
                 lease_gen=gen, attempt_id=attempt_id, attempt=0, deadline_ms=0,
                 predicted_s=None)


def batch_bodies(commits: Sequence[tuple[Mapping[str, Any], bytes]],
                 after: Mapping[str, Any] | None, max_result_bytes: int = 0
                 ) -> list[tuple[int, int, bytes]]:
    """The raw bodies of a batch of ``commits`` (each its entry, ``{"commit",
    "content_type", "metadata"}``, and its result): as few ``/v1/complete_batch`` requests as
    the limits allow (usually one), each ``(how many commits, its JSON's length, body)``.
    A body is its JSON (``{"commits": [entry with "bytes": the result's size, ...], "next":
    after}``: the claim made after them, in the last only), then the results in order; its
    commits fill at most :data:`BATCH_COMMITS_BYTES` of JSON and ``max_result_bytes`` (0:
    no limit) of results."""
    parts: list[list[tuple[dict[str, Any], bytes]]] = [[]]
    head = size = 0
    for entry, data in commits:
        sized = {**entry, "bytes": len(data)}
        entry_bytes = len(json.dumps(sized)) + 2
        over = (head + entry_bytes > BATCH_COMMITS_BYTES
                or 0 < max_result_bytes < size + len(data))
        if parts[-1] and over:
            parts.append([])
            head = size = 0
        parts[-1].append((sized, data))
        head, size = head + entry_bytes, size + len(data)
    bodies = []
    for i, part in enumerate(parts):
        doc: dict[str, Any] = {"commits": [entry for entry, _ in part]}
        if after is not None and i == len(parts) - 1:
            doc["next"] = dict(after)
        head_bytes = json.dumps(doc).encode()
        bodies.append((len(part), len(head_bytes),
                       b"".join([head_bytes, *(data for _, data in part)])))
    return bodies


def commit_answer_to_json(answer: CompleteResult | errors.NovaError) -> dict[str, Any]:
    """One commit's answer in a batch: its result, or why the scripts refused it."""
    if isinstance(answer, CompleteResult):
        return {"job_finished": answer.job_finished, "replayed": answer.replayed}
    if isinstance(answer, errors.StaleResultError):
        kind = "cancelled" if isinstance(answer, errors.JobCancelledError) else "stale"
        return {"kind": kind, "error": answer.reason}
    kind = "not_found" if isinstance(answer, errors.TaskNotFoundError) else "error"
    return {"kind": kind, "error": str(answer)}


def commit_answer_from_json(d: Mapping[str, Any], task_id: str
                            ) -> CompleteResult | errors.NovaError:
    """A batch's answer for the commit of ``task_id``: what the direct batch call returns."""
    if "kind" not in d:
        return CompleteResult(job_finished=bool(d.get("job_finished")),
                              replayed=bool(d.get("replayed")))
    kind, message = d["kind"], str(d.get("error", ""))
    if kind == "stale":
        return errors.StaleResultError(task_id, message)
    if kind == "cancelled":
        return errors.JobCancelledError(task_id, message)
    if kind == "not_found":
        return errors.TaskNotFoundError(message)
    return errors.NovaError(message)
