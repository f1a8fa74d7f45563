"""What ``enqueue`` writes of a job besides its tasks, checked before anything is sent:
app, params, priority, attempts, name, the run-time limit, requirements on the workers'
labels (``placement.py``), the owner (fair share), the model its tasks need warm and how
long the finished job stays in Redis (retention)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from nova_queue import errors
from nova_queue.keys import APP_NAME_RE, JOB_ID_RE
from nova_queue.limits import (
    MAX_ATTEMPTS,
    MAX_COST,
    MAX_INPUT_BYTES,
    MAX_JOB_TASKS,
    MAX_RETENTION_S,
    MAX_RUN_S,
    MIN_COST,
)
from nova_queue.models import TaskSpec
from nova_queue.placement import (
    Requirement,
    parse_requirements,
    requirement_text,
    requirements_json,
)
from nova_queue.terms import parse_budget

#: An owner (fair share) or a model key: short, printable, no separators that matter.
NAME_RE = re.compile(r"^[A-Za-z0-9_.:@+/-]{1,128}\Z")


def job_fields(app: str, tasks: Sequence[TaskSpec], job_id: str, *,
               params: Mapping[str, Any] | None, priority: int, max_attempts: int, name: str,
               timeout_s: float | None = None,
               requires: Sequence[str | Requirement] = (), owner: str = "",
               model: str = "", retention_s: int = 604800, deadline_ms: int | None = None,
               budget: float | None = None) -> dict[str, Any]:
    """The job fields enqueue-9 takes (lua/includes/job_fields.lua checks them again).
    ``deadline_ms`` (epoch ms, Redis time) and ``budget`` (dollars): the job's terms
    (:mod:`nova_queue.terms` parses them)."""
    check_job(app, tasks, job_id, priority, max_attempts, retention_s)
    fields: dict[str, Any] = {
        "app": app, "params": json.dumps(dict(params or {}), sort_keys=True),
        "priority": priority, "max_attempts": max_attempts, "total": len(tasks),
        "name": name[:200], "retention_s": retention_s,
    }
    if timeout_s is not None:
        if not (isinstance(timeout_s, (int, float)) and 0.001 <= timeout_s <= MAX_RUN_S):
            raise errors.InputError(f"timeout must be a number of seconds from 0.001 to "
                                    f"{MAX_RUN_S}, not {timeout_s!r}")
        fields["timeout_s"] = float(timeout_s)
    if deadline_ms is not None:
        if not isinstance(deadline_ms, int) or isinstance(deadline_ms, bool) or deadline_ms <= 0:
            raise errors.InputError(f"deadline must be a time in epoch ms, not {deadline_ms!r}")
        fields["deadline_ms"] = deadline_ms
    if budget is not None:
        fields["budget"] = parse_budget(budget, "budget")
    reqs = check_requirements(requires)
    if reqs:
        fields["requires"] = json.dumps(requirements_json(reqs))
    for key, value in (("owner", owner), ("model", model)):
        if value:
            if not isinstance(value, str) or not NAME_RE.match(value):
                raise errors.InputError(f"{key} {value!r}: use 1 to 128 of A-Z a-z 0-9 "
                                        "_ . : @ + / -")
            fields[key] = value
    return fields


def check_requirements(requires: Sequence[str | Requirement]) -> list[Requirement]:
    """``requires`` (strings as ``--require`` takes them, or ``placement.Requirement``
    tuples) checked as one list: a tuple must be what its text parses back to (a number
    after ``>=``, no comma in a value), and at most MAX_REQUIRES in all."""
    texts = []
    for r in requires:
        if isinstance(r, str):
            texts.append(r)
            continue
        ok = (isinstance(r, tuple) and len(r) == 3 and isinstance(r[0], str)
              and r[1] in ("in", ">=", "<=") and isinstance(r[2], tuple) and r[2]
              and all(isinstance(v, str) for v in r[2]) and (r[1] == "in" or len(r[2]) == 1))
        text = requirement_text(r) if ok else repr(r)
        if not ok or parse_requirements([text]) != [r]:
            raise errors.InputError(f"requirement {text!r}: expected key=value[,value...], "
                                    "key>=number or key<=number")
        texts.append(text)
    return parse_requirements(texts)


def check_job(app: str, tasks: Sequence[TaskSpec], job_id: str, priority: int,
              max_attempts: int, retention_s: int) -> None:
    """Refuse a job the scripts would refuse, with a message naming the field or task."""
    if not APP_NAME_RE.match(app):
        raise errors.InputError(f"invalid app name {app!r}")
    if not isinstance(job_id, str) or not JOB_ID_RE.match(job_id):
        raise errors.InputError(f"invalid job id {job_id!r}: use letters, digits, _ and -")
    if not tasks:
        raise errors.InputError("a job needs at least one task")
    if len(tasks) > MAX_JOB_TASKS:
        raise errors.InputError(f"a job has at most {MAX_JOB_TASKS} tasks")
    if not isinstance(priority, int) or not -1000 <= priority <= 1000:
        raise errors.InputError("priority must be an integer from -1000 to 1000")
    if not isinstance(max_attempts, int) or not 1 <= max_attempts <= MAX_ATTEMPTS:
        raise errors.InputError(f"max attempts must be an integer from 1 to {MAX_ATTEMPTS}")
    if not isinstance(retention_s, int) or not 0 <= retention_s <= MAX_RETENTION_S:
        raise errors.InputError(f"retention must be an integer from 0 to {MAX_RETENTION_S} s")
    for i, spec in enumerate(tasks):
        if not isinstance(spec.input, str):
            raise errors.InputError(f"task {i}: input must be a string")
        if len(spec.input.encode("utf-8", "surrogatepass")) > MAX_INPUT_BYTES:
            raise errors.InputError(f"task {i}: input longer than {MAX_INPUT_BYTES} bytes")
        if not (isinstance(spec.cost, (int, float)) and MIN_COST <= spec.cost <= MAX_COST):
            raise errors.InputError(f"task {i}: cost must be a number from {MIN_COST:g} "
                                    f"to {MAX_COST:g}")


def model_key_text(model: str) -> str:
    """A model name or path as a job's ``model`` key (:data:`NAME_RE`): other characters
    become ``_``; a longer one is cut and ends in a hash of the whole, so keys stay distinct."""
    import hashlib

    key = re.sub(r"[^A-Za-z0-9_.:@+/-]", "_", model.strip())
    if len(key) > 128:
        key = key[:111] + "~" + hashlib.sha256(model.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return key
