"""``synthetic``: a torch-free app that burns a known amount of CPU and draws a PNG card.

Each task hashes (SHA-256, chained over the prompt) until ``seconds × slowdown`` of wall
time has passed, then renders a small card with the prompt, backend, worker, job and task.
``seconds`` is the task's duration on a reference (1×) machine; a worker started with
``--slowdown F`` simulates hardware F times slower by working F times longer. A task's cost
is its ``seconds`` (floored at 1 ms), so a worker's speed estimate for this app reads as
wall seconds per reference second: about 1.0 on a 1× worker, F with ``--slowdown F``.
Card text is drawn with an installed font that has its glyphs (:data:`FONT_FILES`: DejaVu,
Noto Sans CJK), else with Pillow's default font (Latin only: other scripts show boxes).

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
"""

from __future__ import annotations

import colorsys
import functools
import hashlib
import io
import math
import os
import random
import time
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

from PIL import Image, ImageDraw, ImageFont
from PIL.PngImagePlugin import PngInfo

from nova_queue.apps.base import App, AppContext, TaskInput, TaskOutput
from nova_queue.errors import AppError, ConfigError, InputError
from nova_queue.models import TaskSpec

DEFAULTS: dict[str, Any] = {"seconds": 0.2, "size": 256, "crash_on": "", "oom_on": "",
                            "jitter": 0.0, "jitter_seed": 0}
MAX_SECONDS = 3600.0
MIN_SIZE, MAX_SIZE = 64, 1024
MIN_COST = 0.001
_HASHES_PER_CHECK = 256  # SHA-256 rounds between clock reads (~0.1 ms)
#: Fonts for card text, tried in order: a text is drawn with the first installed one that has
#: a glyph for each of its characters (else the one missing fewest), and with Pillow's
#: default font when none is installed. DejaVu covers Latin, Greek, Cyrillic, Arabic and
#: Hebrew; Noto Sans CJK covers Chinese, Japanese and Korean (and Latin). Debian and
#: Ubuntu paths first (fonts-dejavu-core, fonts-noto-cjk), then Fedora and Arch.
FONT_FILES: tuple[str, ...] = (
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
    "/usr/share/fonts/google-noto-cjk/NotoSansCJK-Regular.ttc",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/noto-cjk/NotoSansCJK-Regular.ttc",
)
_GLYPH_PROBE_PX = 24
_MISSING_PROBE = "\uffff"  # a noncharacter: every font draws its "missing glyph" for it


class PoisonTaskError(RuntimeError):
    """Raised on purpose by a task whose prompt matches ``crash_on`` (a simulated app bug)."""


class SyntheticApp(App):
    """Calibrated CPU work plus a PNG card; for tests, demos and scheduler benchmarks."""

    name = "synthetic"
    description = "CPU-only test workload: hashes for N reference seconds, returns a PNG card"
    handles_slowdown = True

    def __init__(self) -> None:
        self._ctx: AppContext | None = None

    def parse_params(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """Validate params (strings or already-parsed values; parsing twice is a no-op)."""
        unknown = sorted(set(raw) - set(DEFAULTS))
        if unknown:
            raise InputError(f"unknown parameter {unknown[0]!r} for app synthetic; "
                             f"known: {', '.join(DEFAULTS)}")
        out = dict(DEFAULTS)
        if "seconds" in raw:
            out["seconds"] = _number("seconds", raw["seconds"], float, 0.0, MAX_SECONDS)
        if "size" in raw:
            out["size"] = _number("size", raw["size"], int, MIN_SIZE, MAX_SIZE)
        if "jitter" in raw:
            out["jitter"] = _number("jitter", raw["jitter"], float, 0.0, 0.9)
        if "jitter_seed" in raw:
            out["jitter_seed"] = _number("jitter_seed", raw["jitter_seed"], int, 0, 2**31)
        for key in ("crash_on", "oom_on"):
            if key in raw:
                value = raw[key]
                if value is None:
                    value = ""
                if not isinstance(value, str):
                    raise InputError(f"parameter {key!r} must be a string, got {value!r}")
                out[key] = value
        return out

    def make_tasks(self, prompts: Sequence[str], params: Mapping[str, Any]) -> list[TaskSpec]:
        """One task per prompt, costing its reference seconds (at least 1 ms)."""
        cost = max(float(params.get("seconds", DEFAULTS["seconds"])), MIN_COST)
        return [TaskSpec(p, cost) for p in prompts]

    def setup(self, ctx: AppContext) -> None:
        """Remember the context; nothing to load."""
        if not (math.isfinite(ctx.slowdown) and ctx.slowdown > 0):
            raise ConfigError(f"slowdown must be a positive number, got {ctx.slowdown!r}")
        self._ctx = ctx

    def batch_size(self, params: Mapping[str, Any]) -> int:
        """One task per batch."""
        return 1

    def run_batch(self, tasks: Sequence[TaskInput]) -> list[TaskOutput]:
        """Work for ``seconds × slowdown`` per task, then draw its card."""
        if self._ctx is None:
            raise AppError("synthetic: setup() was not called")
        return [self._run_one(self._ctx, task) for task in tasks]

    def benchmark_task(self) -> tuple[str, dict[str, Any]]:
        """A 0.05 reference-second task (cost 0.05 on the same scale as real tasks)."""
        return "benchmark", self.parse_params({"seconds": "0.05"})

    def classify_error(self, exc: BaseException) -> str:
        """MemoryError (including ``oom_on``) is ``"oom"``."""
        return "oom" if isinstance(exc, MemoryError) else "error"

    def _run_one(self, ctx: AppContext, task: TaskInput) -> TaskOutput:
        params = task.params
        crash_on, oom_on = params.get("crash_on") or "", params.get("oom_on") or ""
        if crash_on and crash_on in task.input:
            raise PoisonTaskError(f"poison task: prompt contains {crash_on!r} (crash_on)")
        if oom_on and oom_on in task.input:
            raise MemoryError(f"simulated out-of-memory: prompt contains {oom_on!r} (oom_on)")
        seconds = jittered_seconds(float(params.get("seconds", DEFAULTS["seconds"])),
                                   float(params.get("jitter", 0.0)),
                                   int(params.get("jitter_seed", 0)), task.index)
        started = time.perf_counter()
        digest, rounds = burn(task.input, seconds * ctx.slowdown)
        compute_s = time.perf_counter() - started
        meta = {
            "app": self.name, "prompt": _metadata_safe(task.input), "backend": ctx.backend,
            "device": ctx.device, "worker": ctx.worker_name, "worker_id": ctx.worker_id,
            "job": task.job_id, "task": task.task_id, "index": str(task.index),
            "attempt": str(task.attempt), "seconds": f"{seconds:g}",
            "slowdown": f"{ctx.slowdown:g}", "compute_s": f"{compute_s:.4f}",
            "hash_rounds": str(rounds), "digest": digest,
        }
        png = render_card(task.input, meta, int(params.get("size", DEFAULTS["size"])))
        return TaskOutput(data=png, content_type="image/png", extension="png", metadata=meta)


def jittered_seconds(seconds: float, jitter: float, seed: int, index: int) -> float:
    """Task ``index``'s reference seconds: ``seconds`` x (1 ± ``jitter``), uniform and seeded,
    so every run (and every benchmark policy) gets the same durations. The task's cost stays
    nominal: the scheduler does not see the jitter, as with real workloads."""
    if not jitter:
        return seconds
    u = random.Random(f"{seed}:{index}").uniform(-jitter, jitter)
    return round(seconds * (1 + u), 5)


def burn(text: str, duration_s: float) -> tuple[str, int]:
    """Chain SHA-256 over ``text`` until ``duration_s`` has passed; return (hex digest, rounds)."""
    h = hashlib.sha256(text.encode("utf-8", "replace")).digest()
    deadline = time.perf_counter() + max(0.0, duration_s)
    rounds = 0
    while time.perf_counter() < deadline:
        for _ in range(_HASHES_PER_CHECK):
            h = hashlib.sha256(h).digest()
        rounds += _HASHES_PER_CHECK
    return h.hex(), rounds


def render_card(prompt: str, meta: Mapping[str, str], size: int) -> bytes:
    """A ``size``² PNG showing the prompt and provenance, with ``meta`` as PNG text chunks."""
    bg, accent = _colours(meta.get("worker", ""))
    img = Image.new("RGB", (size, size), bg)
    draw = ImageDraw.Draw(img)
    text = _clean_text(prompt)
    footer = [_clean_text(line) for line in (
        f"backend {meta.get('backend', '?')}  worker {meta.get('worker', '?')}",
        f"job {meta.get('job', '?')}",
        f"task {meta.get('index', '?')}  attempt {meta.get('attempt', '?')}")]
    font = _font(max(10, size // 20), text)
    small = _font(max(8, size // 26), " ".join(footer))
    pad = max(4, size // 24)
    bar = max(3, size // 40)
    draw.rectangle((0, 0, size, bar), fill=accent)
    line_h = _line_height(font)
    small_h = _line_height(small)
    footer_top = size - pad - small_h * len(footer)
    max_lines = max(1, (footer_top - 2 * pad - bar) // line_h)
    lines = _wrap(text, font, size - 2 * pad, max_lines)
    y = bar + pad
    for line in lines:
        draw.text((pad, y), line, fill=(20, 20, 20), font=font)
        y += line_h
    draw.line((pad, footer_top - pad // 2, size - pad, footer_top - pad // 2), fill=accent)
    for i, line in enumerate(footer):
        draw.text((pad, footer_top + i * small_h), _fit(line, small, size - 2 * pad),
                  fill=(50, 50, 50), font=small)
    info = PngInfo()
    info.add_text("Software", "nova-queue synthetic")
    for key, value in meta.items():
        info.add_text(key, _metadata_safe(value))
    buf = io.BytesIO()
    img.save(buf, format="PNG", pnginfo=info, compress_level=6)
    return buf.getvalue()


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


def _colours(worker: str) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """A light background and a darker accent, both derived from the worker name."""
    digest = hashlib.sha256(worker.encode("utf-8", "replace")).digest()
    hue = int.from_bytes(digest[:2], "big") / 65536

    def rgb(light: float, sat: float) -> tuple[int, int, int]:
        r, g, b = colorsys.hls_to_rgb(hue, light, sat)
        return round(r * 255), round(g * 255), round(b * 255)

    return rgb(0.88, 0.55), rgb(0.40, 0.65)


@functools.lru_cache(maxsize=16)
def _default_font(px: int) -> Any:
    try:
        return ImageFont.load_default(size=px)  # FreeType font (Pillow >= 10.1)
    except (TypeError, ImportError, OSError):
        return ImageFont.load_default()


@functools.lru_cache(maxsize=64)
def _file_font(path: str, px: int) -> ImageFont.FreeTypeFont | None:
    try:
        return ImageFont.truetype(path, px)
    except OSError:  # unreadable, not a font, or Pillow built without FreeType
        return None


def installed_fonts(files: Sequence[str] | None = None) -> tuple[str, ...]:
    """The font files of :data:`FONT_FILES` (or ``files``) that exist and load."""
    return tuple(p for p in (FONT_FILES if files is None else files)
                 if os.path.isfile(p) and _file_font(p, _GLYPH_PROBE_PX) is not None)


def _glyph(font: Any, ch: str) -> tuple[tuple[int, int], bytes]:
    mask = font.getmask(ch)
    return mask.size, bytes(mask)


@functools.lru_cache(maxsize=8192)
def has_glyph(path: str, ch: str) -> bool:
    """Whether the font file has a glyph for ``ch`` (FreeType draws the font's "missing
    glyph" box for characters it lacks)."""
    font = _file_font(path, _GLYPH_PROBE_PX)
    return font is not None and _glyph(font, ch) != _missing_glyph(path)


@functools.lru_cache(maxsize=16)
def _missing_glyph(path: str) -> tuple[tuple[int, int], bytes]:
    font = _file_font(path, _GLYPH_PROBE_PX)
    return _glyph(font, _MISSING_PROBE) if font is not None else ((0, 0), b"")


def _visible(ch: str) -> bool:
    return not ch.isspace() and unicodedata.category(ch) not in ("Cc", "Cf", "Mn", "Zs")


def font_file_for(text: str, files: Sequence[str] | None = None) -> str | None:
    """The installed font that draws most of ``text`` (the first with every glyph); None
    when no font is installed."""
    paths = installed_fonts(files)
    chars = {c for c in text if _visible(c)}
    best, best_missing = None, -1
    for path in paths:
        missing = sum(not has_glyph(path, c) for c in chars)
        if missing == 0:
            return path
        if best is None or missing < best_missing:
            best, best_missing = path, missing
    return best


def _font(px: int, text: str = "") -> Any:
    """A font of ``px`` pixels for ``text``: an installed one that covers it, else Pillow's
    default."""
    path = font_file_for(text)
    font = _file_font(path, px) if path else None
    return font if font is not None else _default_font(px)


def _line_height(font: Any) -> int:
    box = font.getbbox("Ag")
    return int(box[3] - box[1]) + 4


def _clean_text(text: str) -> str:
    """Printable text: control/separator characters become spaces, surrogates '?'."""
    text = text.encode("utf-8", "replace").decode("utf-8")
    return "".join(" " if unicodedata.category(c) in ("Cc", "Zl", "Zp") else c for c in text)


def _metadata_safe(value: str) -> str:
    """Text a PNG chunk can hold: valid Unicode without NUL."""
    return value.encode("utf-8", "replace").decode("utf-8").replace("\x00", "\ufffd")


def _drawable(text: str, font: Any) -> str:
    """The bitmap fallback font only encodes Latin-1; replace what it cannot draw."""
    if isinstance(font, ImageFont.FreeTypeFont):
        return text
    return text.encode("latin-1", "replace").decode("latin-1")


def _fit(text: str, font: Any, width: int) -> str:
    text = _drawable(text, font)
    if font.getlength(text) <= width:
        return text
    while text and font.getlength(text + "…") > width:
        text = text[:-1]
    return _drawable(text + "…", font)


def _wrap(text: str, font: Any, width: int, max_lines: int) -> list[str]:
    """Greedy word wrap by measured width; long words break anywhere; overflow ends in '…'."""
    text = _drawable(text, font)
    lines: list[str] = []
    current = ""
    for word in text.split(" "):
        candidate = f"{current} {word}" if current else word
        if font.getlength(candidate) <= width:
            current = candidate
            continue
        if current:
            lines.append(current)
        current = ""
        for ch in word:  # a word wider than the card: break it
            if font.getlength(current + ch) > width and current:
                lines.append(current)
                current = ""
            current += ch
        if len(lines) > max_lines:
            break
    if current:
        lines.append(current)
    if len(lines) > max_lines:
        lines = lines[:max_lines]
        lines[-1] = _fit(lines[-1] + "…", font, width)
    return lines
