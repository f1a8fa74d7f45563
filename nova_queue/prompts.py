"""Prompt files: UTF-8 text, one prompt per line.

Rules (a file either parses completely or is rejected; nothing is half-read):

- UTF-8, an optional leading byte-order mark is ignored.
- Lines end at ``\\n`` only; a ``\\r`` before it (CRLF) is dropped. Other Unicode line
  separators (U+2028, U+2029, U+0085, ``\\v``, ``\\f``, a lone ``\\r``) are *not* line ends:
  inside a line they stay in the prompt (``str.splitlines`` would split on them).
- Surrounding whitespace is trimmed; blank lines and lines starting with ``#`` (after
  trimming) are skipped.
- Rejected with :class:`~nova_queue.errors.InputError` naming the source and line: NUL bytes,
  invalid UTF-8 (the line of the first bad byte), a prompt longer than ``max_line_chars``
  characters (after trimming), more than ``max_prompts`` prompts, no prompts at all, and a
  missing, unreadable or directory path.
- Bounded input: more than ``max_bytes`` bytes (default :data:`MAX_BYTES`; the CLI's
  ``enqueue --max-bytes`` / ``NOVA_MAX_PROMPT_BYTES``) is rejected without reading further.
  A path must name a regular file: FIFOs, devices (``/dev/zero``) and sockets are refused
  before they are opened (opening a FIFO with no writer would block forever); standard
  input (``-``) is read, bounded by the same limit.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import BinaryIO

from nova_queue.errors import InputError
from nova_queue.settings import DEFAULT_MAX_PROMPT_BYTES

MAX_LINE_CHARS = 4000
MAX_PROMPTS = 1_000_000
#: Largest prompts input read (bytes) unless told otherwise (Settings.max_prompt_bytes).
MAX_BYTES = DEFAULT_MAX_PROMPT_BYTES
#: Bytes read per call while reading standard input.
_READ_CHUNK = 1024 * 1024
STDIN = "-"
_BOM = b"\xef\xbb\xbf"


def read_prompts(
    path_or_dash: str,
    stdin: BinaryIO | None = None,
    *,
    max_line_chars: int = MAX_LINE_CHARS,
    max_prompts: int = MAX_PROMPTS,
    max_bytes: int = MAX_BYTES,
) -> list[str]:
    """Prompts from a file, or from ``stdin`` (default ``sys.stdin``) when the path is ``-``."""
    if path_or_dash == STDIN:
        source = "<stdin>"
        stream = stdin if stdin is not None else getattr(sys.stdin, "buffer", sys.stdin)
        if stream is None:
            raise InputError("no standard input to read prompts from", source=source)
        data = _read_bounded(stream, source, max_bytes)
    else:
        source = str(path_or_dash)
        data = _read_file(Path(path_or_dash), source, max_bytes)
    return parse_prompts(data, source, max_line_chars=max_line_chars, max_prompts=max_prompts)


def parse_prompts(
    data: bytes,
    source: str,
    *,
    max_line_chars: int = MAX_LINE_CHARS,
    max_prompts: int = MAX_PROMPTS,
) -> list[str]:
    """The prompts in ``data`` (the bytes of ``source``); InputError naming the line if invalid."""
    data = data.removeprefix(_BOM)
    _check_bytes(data, source)
    text = data.decode("utf-8")
    prompts: list[str] = []
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.strip()  # also drops the \r of a CRLF line end
        if not line or line.startswith("#"):
            continue
        if len(line) > max_line_chars:
            raise InputError(
                f"prompt is {len(line)} characters long; the limit is {max_line_chars}",
                source=source, line=number,
            )
        if len(prompts) >= max_prompts:
            raise InputError(f"more than {max_prompts} prompts; split the file",
                             source=source, line=number)
        prompts.append(line)
    if not prompts:
        raise InputError("no prompts found (only blank lines and # comments)", source=source)
    return prompts


def _too_big(source: str, max_bytes: int, size: int | None = None) -> InputError:
    found = f"is {size} bytes" if size is not None else f"has more than {max_bytes} bytes"
    return InputError(f"{found}; the limit is {max_bytes} bytes (raise it with --max-bytes "
                      "or NOVA_MAX_PROMPT_BYTES, or split the prompts)", source=source)


def _read_bounded(stream: BinaryIO, source: str, max_bytes: int) -> bytes:
    """At most ``max_bytes`` bytes of ``stream``; InputError as soon as there are more."""
    parts: list[bytes] = []
    size = 0
    while True:
        chunk = stream.read(min(_READ_CHUNK, max_bytes + 1 - size))
        if not chunk:
            break
        if isinstance(chunk, str):  # a text stream (e.g. a test harness's stdin)
            chunk = chunk.encode("utf-8", "surrogateescape")
        parts.append(chunk)
        size += len(chunk)
        if size > max_bytes:
            raise _too_big(source, max_bytes)
    return b"".join(parts)


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _check_regular(mode: int, source: str) -> None:
    if stat.S_ISDIR(mode):
        raise InputError("is a directory, not a prompts file", source=source)
    if not stat.S_ISREG(mode):
        raise InputError(f"is {_kind(mode)}, not a regular file; pipe it in with "
                         "'enqueue -' to read standard input", source=source)


def _read_file(path: Path, source: str, max_bytes: int) -> bytes:
    """A regular file's bytes, at most ``max_bytes``; checked before it is opened."""
    try:
        info = os.stat(path)
        _check_regular(info.st_mode, source)
        if info.st_size > max_bytes:
            raise _too_big(source, max_bytes, info.st_size)
        # O_NONBLOCK: if the path became a FIFO since the stat, open must not wait for a writer
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        raise InputError("no such file", source=source) from None
    except PermissionError:
        raise InputError("permission denied", source=source) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", source=source) from None
    with os.fdopen(fd, "rb") as f:
        _check_regular(os.fstat(f.fileno()).st_mode, source)
        try:
            return _read_bounded(f, source, max_bytes)  # bounded even if the file grows
        except OSError as exc:
            raise InputError(f"cannot read: {exc.strerror or exc}", source=source) from None


def _line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def _check_bytes(data: bytes, source: str) -> None:
    """Reject NUL bytes and invalid UTF-8, whichever comes first, naming its line."""
    nul = data.find(b"\x00")
    try:
        data.decode("utf-8")
        bad = -1
        bad_reason = ""
    except UnicodeDecodeError as exc:
        bad = exc.start
        bad_reason = f"invalid UTF-8 (byte 0x{data[bad]:02x} at offset {bad})"
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise InputError("looks like UTF-16 (it starts with a UTF-16 byte-order mark); "
                         "save it as UTF-8", source=source, line=1)
    if nul >= 0 and (bad < 0 or nul < bad):
        raise InputError(f"NUL byte at offset {nul}; prompts files are UTF-8 text, not binary",
                         source=source, line=_line_of(data, nul))
    if bad >= 0:
        raise InputError(f"{bad_reason}; save the file as UTF-8",
                         source=source, line=_line_of(data, bad))
