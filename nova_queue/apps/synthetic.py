"""``synthetic``: a torch-free app that burns a known amount of CPU and draws a PNG card.

Each task hashes (SHA-256, chained over the prompt) until ``seconds × slowdown`` of wall
time has passed, then renders a small card with the prompt, backend, worker, job and task.
``seconds`` is the task's duration on a reference (1×) machine; a worker started with
``--slowdown F`` simulates hardware F times slower by working F times longer. A task's cost
is its ``seconds`` (floored at 1 ms), so a worker's speed estimate for this app reads as
wall seconds per reference second: about 1.0 on a 1× worker, F with ``--slowdown F``.
This module is the spec (params and costs, no Pillow); the worker runs tasks with
:class:`nova_queue.workers.apps.synthetic.SyntheticRunner`.

Params (``-p key=value``):

===========  =======  ===========  =====================================================
key          type     default      meaning
===========  =======  ===========  =====================================================
seconds      float    0.2          reference seconds per task, 0..3600
size         int      256          PNG edge in pixels, 64..1024
crash_on     str      (none)       a task whose prompt contains it raises every time
oom_on       str      (none)       a task whose prompt contains it raises MemoryError
jitter       float    0            each task runs seconds x (1 ± jitter), 0..0.9, seeded
jitter_seed  int      0            seed of the jitter: same seed, same durations
===========  =======  ===========  =====================================================

``crash_on`` and ``oom_on`` are for tests and demos of failures (:data:`TEST_ONLY`): a job's
params hold them only when they are set.

Checking results: a card shows the worker that drew it, so two cards of one task never have
the same bytes. Each card carries the task's ``answer`` (:func:`task_answer`, a hash of the
prompt: what any worker must compute for that task) as a PNG text chunk, and
:meth:`SyntheticSpec.same_result` compares answers and image sizes.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Mapping, Sequence
from typing import Any

from nova_queue.apps.base import AppSpec
from nova_queue.apps.image_checks import png_size, png_text
from nova_queue.errors import InputError
from nova_queue.models import TaskSpec

DEFAULTS: dict[str, Any] = {"seconds": 0.2, "size": 256, "crash_on": "", "oom_on": "",
                            "jitter": 0.0, "jitter_seed": 0}
#: Params for tests and demos of failures: a job's params hold them only when they are set,
#: so the gallery, ``status --json`` and the results' manifest do not show them otherwise.
TEST_ONLY = ("crash_on", "oom_on")
MAX_SECONDS = 3600.0
MIN_SIZE, MAX_SIZE = 64, 1024
MIN_COST = 0.001


class SyntheticSpec(AppSpec):
    """Calibrated CPU work plus a PNG card; for tests, demos and scheduler benchmarks."""

    name = "synthetic"
    concurrent = True  # each task hashes and draws on its own: safe in several threads
    description = "CPU-only test workload: hashes for N reference seconds, returns a PNG card"
    runner = "nova_queue.workers.apps.synthetic:SyntheticRunner"

    def parse_params(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """Validate params (strings or already-parsed values; parsing twice is a no-op)."""
        unknown = sorted(set(raw) - set(DEFAULTS))
        if unknown:
            raise InputError(f"unknown parameter {unknown[0]!r} for app synthetic; "
                             f"known: {', '.join(DEFAULTS)}")
        out = {k: v for k, v in DEFAULTS.items() if k not in TEST_ONLY}
        if "seconds" in raw:
            out["seconds"] = _number("seconds", raw["seconds"], float, 0.0, MAX_SECONDS)
        if "size" in raw:
            out["size"] = _number("size", raw["size"], int, MIN_SIZE, MAX_SIZE)
        if "jitter" in raw:
            out["jitter"] = _number("jitter", raw["jitter"], float, 0.0, 0.9)
        if "jitter_seed" in raw:
            out["jitter_seed"] = _number("jitter_seed", raw["jitter_seed"], int, 0, 2**31)
        for key in TEST_ONLY:
            value = raw.get(key)
            if value is not None and not isinstance(value, str):
                raise InputError(f"parameter {key!r} must be a string, got {value!r}")
            if value:
                out[key] = value
        return out

    def make_tasks(self, prompts: Sequence[str], params: Mapping[str, Any]) -> list[TaskSpec]:
        """One task per prompt, costing its reference seconds (at least 1 ms)."""
        cost = max(float(params.get("seconds", DEFAULTS["seconds"])), MIN_COST)
        return [TaskSpec(p, cost) for p in prompts]

    def same_result(self, a: bytes, b: bytes, *, params: Mapping[str, Any] | None = None
                    ) -> bool:
        """Whether two cards of one task carry the same ``answer`` (and size): their bytes
        differ with the worker that drew them."""
        if a == b:
            return True
        ta, tb = png_text(a), png_text(b)
        return bool(ta.get("answer")) and ta.get("answer") == tb.get("answer") \
            and png_size(a) == png_size(b)


def task_answer(prompt: str) -> str:
    """What every worker must compute for a task of ``prompt``: its SHA-256, hex."""
    return hashlib.sha256(prompt.encode("utf-8", "replace")).hexdigest()


def jittered_seconds(seconds: float, jitter: float, seed: int, index: int) -> float:
    """Task ``index``'s reference seconds: ``seconds`` x (1 ± ``jitter``), uniform and seeded,
    so every run (and every benchmark policy) gets the same durations. The task's cost stays
    nominal: the scheduler does not see the jitter, as with real workloads."""
    if not jitter:
        return seconds
    u = random.Random(f"{seed}:{index}").uniform(-jitter, jitter)
    return round(seconds * (1 + u), 5)


def _number(key: str, value: Any, kind: type, low: float, high: float) -> Any:
    try:
        if kind is int and isinstance(value, float) and not value.is_integer():
            raise ValueError
        number = kind(value)
    except (TypeError, ValueError):
        raise InputError(f"parameter {key!r} must be {'an integer' if kind is int else 'a number'},"
                         f" got {value!r}") from None
    if not (math.isfinite(number) and low <= number <= high):
        raise InputError(f"parameter {key!r} must be between {low:g} and {high:g}, got {value!r}")
    return number
