"""Worker labels and job requirements: which workers may run a job.

A worker carries **labels** (``key=value``): automatic ones (``backend``, ``device``,
``memory_gb`` of the device, ``host``, ``fp16``, ``nova`` and ``app.<name>`` with versions)
and custom ones (``nova-queue worker --label gpu=4090``, env ``NOVA_LABELS``). A job
carries **requirements**, all of which a worker's labels must meet for it to get the job's
tasks (``lua/includes/meets.lua`` decides in the claim; :func:`meets` is the same rule for
the CLI and the gallery):

- ``key=a,b``: the label is one of the values (set membership; one value: equality);
- ``key>=n`` / ``key<=n``: the label is a number at least / at most ``n``.

A worker without the label does not meet the requirement.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from nova_queue.errors import InputError

#: A label or requirement key; a label value (no commas: requirements list values with them).
KEY_RE = re.compile(r"^[a-z][a-z0-9_.-]{0,31}\Z")
VALUE_RE = re.compile(r"^[A-Za-z0-9_.:+/@-]{1,64}\Z")
#: Most labels per worker, requirements per job, values per requirement (the scripts cap
#: the same: lua/includes/common.lua MAX_LABELS, MAX_REQUIRES).
MAX_LABELS = 32
#: Labels every worker sets about itself (``nova_queue.workers.record``), besides
#: ``app.<name>``; a custom label may not replace one, and behind a gateway only a token
#: may pin one.
AUTOMATIC_LABELS = ("backend", "device", "memory_gb", "host", "fp16", "nova")
MAX_REQUIRES = 16
MAX_VALUES = 16
_REQUIREMENT_RE = re.compile(r"^([^=<>!\s]+)\s*(>=|<=|=)\s*(.+)\Z")

Requirement = tuple[str, str, tuple[str, ...]]


def parse_labels(pairs: Iterable[str], source: str = "--label") -> dict[str, str]:
    """``key=value`` strings (each may hold several, comma-separated) into labels."""
    labels: dict[str, str] = {}
    for raw in pairs:
        for item in (p.strip() for p in str(raw).split(",")):
            if not item:
                continue
            key, sep, value = item.partition("=")
            key, value = key.strip(), value.strip()
            if not sep or not KEY_RE.match(key) or not VALUE_RE.match(value):
                raise InputError(f"{source} {item!r}: expected key=value (key: a-z 0-9 _ . -, "
                                 "from a letter, at most 32; value: at most 64 of A-Z a-z "
                                 "0-9 _ . : + / @ -)")
            labels[key] = value
    if len(labels) > MAX_LABELS:
        raise InputError(f"{source}: at most {MAX_LABELS} labels")
    return labels


def parse_requirements(items: Iterable[str], source: str = "--require") -> list[Requirement]:
    """``key=a,b`` / ``key>=n`` / ``key<=n`` strings into requirements."""
    out: list[Requirement] = []
    for raw in items:
        text = str(raw).strip()
        m = _REQUIREMENT_RE.match(text)
        if not m or not KEY_RE.match(m.group(1)):
            raise InputError(f"{source} {text!r}: expected key=value[,value...], key>=number "
                             "or key<=number")
        key, op, rest = m.group(1), m.group(2), m.group(3).strip()
        if op == "=":
            values = tuple(v.strip() for v in rest.split(","))
            if not values or len(values) > MAX_VALUES or not all(VALUE_RE.match(v) for v in values):
                raise InputError(f"{source} {text!r}: 1 to {MAX_VALUES} values of at most 64 "
                                 "of A-Z a-z 0-9 _ . : + / @ -")
            out.append((key, "in", values))
        else:
            number = _number(rest)
            if number is None:
                raise InputError(f"{source} {text!r}: {op} needs a number")
            out.append((key, op, (rest,)))
    if len(out) > MAX_REQUIRES:
        raise InputError(f"{source}: at most {MAX_REQUIRES} requirements")
    return out


def requirements_json(reqs: Sequence[Requirement]) -> list[list[Any]]:
    """The job field's shape: ``[[key, op, [values...]], ...]``."""
    return [[k, op, list(values)] for k, op, values in reqs]


def requirements_from_json(raw: Any) -> list[Requirement]:
    """A stored job's requirements (anything malformed reads as none)."""
    out: list[Requirement] = []
    if not isinstance(raw, list):
        return out
    for item in raw[:MAX_REQUIRES]:
        if (isinstance(item, list) and len(item) == 3 and isinstance(item[0], str)
                and item[1] in ("in", ">=", "<=") and isinstance(item[2], list)):
            out.append((item[0], item[1], tuple(str(v) for v in item[2][:MAX_VALUES])))
    return out


def labels_from_json(raw: Any) -> dict[str, str]:
    """A worker's stored ``labels`` field (JSON object) as a dict; malformed reads as {}."""
    try:
        value = json.loads(raw) if isinstance(raw, str) and len(raw) <= 8192 else {}
    except ValueError:
        return {}
    if not isinstance(value, dict):
        return {}
    return {str(k): str(v) for k, v in list(value.items())[:MAX_LABELS]
            if isinstance(v, (str, int, float)) and not isinstance(v, bool)}


def requirement_text(req: Requirement) -> str:
    """``backend=cuda,rocm`` / ``memory_gb>=12``: how the user wrote it."""
    key, op, values = req
    return f"{key}={','.join(values)}" if op == "in" else f"{key}{op}{values[0]}"


def meets_one(labels: Mapping[str, str], req: Requirement) -> bool:
    """Whether ``labels`` meet one requirement (the rule of lua/includes/meets.lua)."""
    key, op, values = req
    have = labels.get(key)
    if have is None:
        return False
    if op == "in":
        return str(have) in values
    a, b = _number(str(have)), _number(values[0])
    if a is None or b is None:
        return False
    return a >= b if op == ">=" else a <= b


def meets(labels: Mapping[str, str], reqs: Sequence[Requirement]) -> bool:
    """Whether ``labels`` meet every requirement."""
    return all(meets_one(labels, r) for r in reqs)


def unmet(workers_labels: Sequence[Mapping[str, str]], reqs: Sequence[Requirement]) -> str:
    """Why no worker of ``workers_labels`` meets ``reqs``: the first requirement none meets,
    or that none meets all of them together."""
    for req in reqs:
        if not any(meets_one(labels, req) for labels in workers_labels):
            key = req[0]
            seen = sorted({labels[key] for labels in workers_labels if key in labels})[:5]
            have = f" (live workers have {key}: {', '.join(seen)})" if seen else (
                f" (no live worker has a {key} label)")
            return f"requirement {requirement_text(req)} is met by no live worker{have}"
    return "no single live worker meets all requirements " + " ".join(
        requirement_text(r) for r in reqs)


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None
