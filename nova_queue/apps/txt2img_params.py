"""txt2img's parameters, task seeds, task costs and batch sizing: pure functions, no torch.

Params (``-p key=value``; all optional):

=====================  =========================  ===============================================
``model``              ``stabilityai/sd-turbo``   a Hugging Face hub id (``org/name``) or a
                                                  pipeline folder under the worker's model roots
                                                  (``NOVA_MODEL_ROOTS``, its ``-o model=DIR``)
``width``, ``height``  512                        pixels, multiples of 8 in 64..2048
``steps``              1                          denoising steps, 1..100
``guidance``           0.0                        classifier-free guidance scale (SD-Turbo: 0)
``seed``               0                          job seed, int >= 0; see :func:`task_seed`
``batch``              (from device memory)       images per pipeline call, 1..64
``compile``            false                      ``torch.compile`` the UNet
``attention_slicing``  auto                       true/false/auto (auto: on for mps, small GPUs)
=====================  =========================  ===============================================

Parsing is idempotent: already-parsed values (ints, bools, ``None``) parse to themselves, so
the worker may re-validate params it read back from JSON.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from nova_queue.errors import InputError

DEFAULT_MODEL = "stabilityai/sd-turbo"
KNOWN_PARAMS = ("model", "width", "height", "steps", "guidance", "seed", "batch", "compile",
                "attention_slicing")
#: One 512x512 single-step image costs 1.0.
REFERENCE_PIXELS = 512 * 512
SEED_MULTIPLIER = 1_000_003  # a prime, so (job seed, index) pairs rarely collide
GIB = 2**30
TRUE_WORDS, FALSE_WORDS = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def task_seed(job_seed: int, index: int) -> int:
    """Noise seed of task ``index`` in a job seeded ``job_seed``:
    ``(job_seed * 1_000_003 + index) % 2**63`` (stable; part of the reproducibility contract)."""
    return (job_seed * SEED_MULTIPLIER + index) % 2**63


def task_cost(params: Mapping[str, Any]) -> float:
    """``width * height * steps / 512**2``: a 512x512 single-step image is 1.0."""
    return params["width"] * params["height"] * params["steps"] / REFERENCE_PIXELS


def truthy(value: Any) -> bool:
    """True for 1/true/yes/on (any case), as worker options and env vars are written."""
    return str(value).strip().lower() in TRUE_WORDS


def _int(key: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise InputError(f"param {key}: must be an integer, got {value!r}")
    try:
        number = int(value.strip()) if isinstance(value, str) else value
    except ValueError:
        raise InputError(f"param {key}: must be an integer, got {value!r}") from None
    if not lo <= number <= hi:
        raise InputError(f"param {key}: must be in {lo}..{hi}, got {number}")
    return number


def _size(key: str, value: Any) -> int:
    number = _int(key, value, 64, 2048)
    if number % 8:
        raise InputError(f"param {key}: must be a multiple of 8, got {number}")
    return number


def _float(key: str, value: Any, lo: float, hi: float) -> float:
    try:
        number = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise InputError(f"param {key}: must be a number, got {value!r}") from None
    if isinstance(value, bool) or not math.isfinite(number) or not lo <= number <= hi:
        raise InputError(f"param {key}: must be a number in {lo:g}..{hi:g}, got {value!r}")
    return number


def _bool(key: str, value: Any, *, auto: bool = False) -> bool | str:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in TRUE_WORDS:
        return True
    if text in FALSE_WORDS:
        return False
    if auto and text == "auto":
        return "auto"
    choices = "true/false" + ("/auto" if auto else "")
    raise InputError(f"param {key}: must be {choices}, got {value!r}")


def parse_params(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Validate params (strings or parsed values) into a JSON-able dict; InputError names the
    param."""
    unknown = sorted(set(raw) - set(KNOWN_PARAMS))
    if unknown:
        raise InputError(f"unknown param {', '.join(unknown)}; known params: "
                         f"{', '.join(KNOWN_PARAMS)}")
    model = str(raw.get("model", DEFAULT_MODEL)).strip()
    if not model:
        raise InputError("param model: must be a hub id or a folder, got ''")
    batch = raw.get("batch")
    return {
        "model": model,
        "width": _size("width", raw.get("width", 512)),
        "height": _size("height", raw.get("height", 512)),
        "steps": _int("steps", raw.get("steps", 1), 1, 100),
        "guidance": _float("guidance", raw.get("guidance", 0.0), 0.0, 50.0),
        "seed": _int("seed", raw.get("seed", 0), 0, 2**63 - 1),
        "batch": None if batch in (None, "") else _int("batch", batch, 1, 64),
        "compile": _bool("compile", raw.get("compile", False)),
        "attention_slicing": _bool("attention_slicing", raw.get("attention_slicing", "auto"),
                                   auto=True),
    }


def default_batch_size(backend: str, width: int, height: int, *, memory_free: int | None,
                       memory_total: int | None, dtype: str = "float16") -> int:
    """Images per pipeline call from device memory and image size.

    Base count at 512x512: cuda/rocm by free (else total) memory: 8 at >= 20 GiB, 4 at >= 12,
    2 at >= 8, else 1, halved in fp32; mps 2 with >= 16 GiB unified memory, else 1; cpu 1.
    The base scales with 512**2 / (width * height) and is capped at 64 (cuda/rocm), 2 (mps)
    and 4 (cpu, where batching barely raises throughput). Never below 1.
    """
    if backend in ("cuda", "rocm"):
        gib = (memory_free or memory_total or 0) / GIB
        base, cap = (8 if gib >= 20 else 4 if gib >= 12 else 2 if gib >= 8 else 1), 64
        if dtype == "float32":
            base = max(1, base // 2)
    elif backend == "mps":
        base, cap = (2 if (memory_total or 0) >= 16 * GIB else 1), 2
    else:
        base, cap = 1, 4
    return max(1, min(cap, int(base * REFERENCE_PIXELS / (width * height))))
