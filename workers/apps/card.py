"""The synthetic app's PNG card: the prompt, word-wrapped, and its provenance, drawn with
Pillow. Text is drawn with an installed font that has its glyphs (:data:`FONT_FILES`:
DejaVu, Noto Sans CJK), else with Pillow's default font (Latin only: other scripts show
boxes).
"""

from __future__ import annotations

import colorsys
import functools
import hashlib
import io
import os
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

from PIL import Image, ImageDraw, ImageFont
from PIL.PngImagePlugin import PngInfo

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
        info.add_text(key, metadata_safe(value))
    buf = io.BytesIO()
    img.save(buf, format="PNG", pnginfo=info, compress_level=6)
    return buf.getvalue()


def black_png(size: int) -> bytes:
    """An all-black ``size``² PNG: a broken device's output, for tests of validation."""
    buf = io.BytesIO()
    Image.new("RGB", (size, size)).save(buf, format="PNG")
    return buf.getvalue()


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


def metadata_safe(value: str) -> str:
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
