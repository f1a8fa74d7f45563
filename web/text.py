"""Text shown to people: bidi controls made visible, durations, sizes, backend labels.

``static/common.js`` mirrors :func:`visible_bidi` for live updates; keep the two in step.
"""

from __future__ import annotations

import math
import re
from typing import Any

# Characters that reorder or hide text (Trojan Source, CVE-2021-42574): explicit embeddings
# and overrides, isolates, marks and the Arabic letter mark.
BIDI_CONTROLS = (
    [chr(c) for c in range(0x202A, 0x202F)]
    + [chr(c) for c in range(0x2066, 0x206A)]
    + ["\u200e", "\u200f", "\u061c"]
)
_BIDI_RE = re.compile("[" + "".join(BIDI_CONTROLS) + "]")

BACKEND_LABELS = {"cuda": "CUDA", "rocm": "ROCm", "mps": "Metal", "cpu": "CPU"}


def visible_bidi(value: Any) -> Any:
    """Replace each bidi control character in a string by a visible ``⟪U+202E⟫`` marker."""
    if not isinstance(value, str) or not _BIDI_RE.search(value):
        return value
    # Markup.replace / re.sub on a Markup keep the Markup type; markers contain no HTML.
    return _BIDI_RE.sub(lambda m: f"\u27eaU+{ord(m.group()):04X}\u27eb", value)


def backend_label(backend: str) -> str:
    """Badge text of a backend: CUDA, ROCm, Metal (``mps``), CPU; unknown ones as given."""
    return BACKEND_LABELS.get(backend, backend.upper() if backend else "?")


def fmt_seconds(seconds: float | None) -> str:
    """``0.42 s``, ``12.3 s``, ``4 min 05 s``, ``2 h 03 min``; ``–`` when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "–"
    if seconds < 10:
        return f"{seconds:.2f} s"
    if seconds < 60:
        return f"{seconds:.1f} s"
    total = round(seconds)
    if total < 3600:
        return f"{total // 60} min {total % 60:02d} s"
    return f"{total // 3600} h {total % 3600 // 60:02d} min"


def fmt_bytes(size: int | None) -> str:
    """``512 B``, ``1.5 KiB``, ``24.0 GiB``; ``–`` when unknown."""
    if size is None:
        return "–"
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"  # pragma: no cover


def fmt_age(then_ms: int | None, now_ms: int) -> str:
    """How long ago ``then_ms`` was: ``3.1 s ago``; ``never`` when unknown."""
    if not then_ms:
        return "never"
    return f"{fmt_seconds(max(0, now_ms - then_ms) / 1000)} ago"


def missing_status(exc: Exception) -> int:
    """HTTP status for a job that cannot be read: 410 Gone once it expired, else 404."""
    from nova_queue.errors import JobExpiredError

    return 410 if isinstance(exc, JobExpiredError) else 404
