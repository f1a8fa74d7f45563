"""Checks on image results: what a PNG result must be, and when two results of one task
agree. txt2img uses both; synthetic's runner checks its cards with :func:`image_problem`.

* :func:`image_problem` — why a PNG cannot be a right result whatever the prompt (it does
  not decode, has another size than asked, is all black or one colour: the classic fp16 VAE
  failure renders NaN, which becomes black), or None. A runner's ``validate`` raises
  :class:`~nova_queue.errors.InvalidOutput` with it; txt2img catches NaN itself in its
  runner, on the float image before it is quantised (a PNG holds no NaN).
* :func:`same_image` — whether two PNGs of one task agree: same size and mode, and a
  perceptual hash (``imagehash.phash``, 64 bits) at most :data:`MAX_PHASH_DISTANCE` bits
  apart. Backends never render bit-identical images (CUDA, ROCm, MPS and CPU round
  differently), so bytes cannot be compared. The threshold was measured with
  ``benchmarks/verify_threshold.py`` (docs/SECURITY.md, "Checking results").

Pillow and imagehash (the ``txt2img`` extra) are imported inside the functions: importing
this module imports neither.
"""

from __future__ import annotations

import io
from typing import Any

#: Largest phash distance (bits of 64) between two results of one task that still agree.
#: Measured on the tiny model (benchmarks/verify_threshold.py, docs/SECURITY.md): one task
#: under CPU numerics variants 0-4 bits apart, another seed 24-34; CUDA, ROCm and MPS were
#: not measured. Two independent random hashes land within 10 bits once in 10^8 pairs.
MAX_PHASH_DISTANCE = 10
#: An image whose every pixel is at most this level (of 255) in every band is all black.
BLACK_LEVEL = 4
#: An image whose every band spans at most this many levels is one colour.
CONSTANT_LEVELS = 2


def open_png(data: bytes) -> Any:
    """The decoded image of ``data`` (loaded; ``PIL.UnidentifiedImageError`` or OSError if
    it is not an image)."""
    from PIL import Image

    img = Image.open(io.BytesIO(data))
    img.load()
    return img


def image_problem(data: bytes, width: int | None = None, height: int | None = None
                  ) -> str | None:
    """Why ``data`` cannot be a right txt2img result (``width`` x ``height`` when given), or
    None: it must decode, have that size, and be neither all black nor one colour."""
    try:
        img = open_png(data)
    except Exception as exc:  # noqa: BLE001 - whatever the decoder says, it is no image
        return f"not a decodable image ({type(exc).__name__})"
    if width and height and img.size != (width, height):
        return f"image is {img.size[0]}x{img.size[1]}, the task asked for {width}x{height}"
    bands = img.convert("RGB").getextrema()  # ((min, max), ...) per band, in C
    if all(high <= BLACK_LEVEL for _, high in bands):
        return "all-black image"
    if all(high - low <= CONSTANT_LEVELS for low, high in bands):
        colour = "#" + "".join(f"{low:02x}" for low, _ in bands)
        return f"constant image (every pixel {colour})"
    return None


def phash_distance(a: bytes, b: bytes) -> int | None:
    """Bits (of 64) between the perceptual hashes of PNGs ``a`` and ``b``; None when they
    differ in size or mode or one does not decode."""
    import imagehash

    try:
        ia, ib = open_png(a), open_png(b)
    except Exception:  # noqa: BLE001 - an undecodable result agrees with nothing
        return None
    if ia.size != ib.size or ia.mode != ib.mode:
        return None
    return int(imagehash.phash(ia) - imagehash.phash(ib))


def same_image(a: bytes, b: bytes, max_distance: int = MAX_PHASH_DISTANCE) -> bool:
    """Whether PNGs ``a`` and ``b`` show the same image: same size and mode, perceptual
    hashes at most ``max_distance`` bits apart."""
    if a == b:
        return True
    distance = phash_distance(a, b)
    return distance is not None and distance <= max_distance


def png_text(data: bytes) -> dict[str, str]:
    """The text chunks of PNG ``data`` ({} when it does not decode)."""
    try:
        return dict(getattr(open_png(data), "text", {}))
    except Exception:  # noqa: BLE001 - not a PNG: no text
        return {}


def png_size(data: bytes) -> tuple[int, int] | None:
    """The (width, height) of image ``data`` (None when it does not decode)."""
    try:
        return tuple(open_png(data).size)  # type: ignore[return-value]
    except Exception:  # noqa: BLE001 - not an image
        return None
