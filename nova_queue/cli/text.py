"""Stored text made safe for a terminal: control characters shown, never obeyed.

Prompts, job names, everything a worker writes about itself (name, host, device,
backend, apps) and any job or task field (a worker credential may ``HSET`` a job's
``state`` or ``id``) come from other people. Printed raw, ``ESC ] 0 ; title BEL`` retitles the
operator's terminal, ``ESC [ 2 J`` clears it and U+202E reverses the rest of a line. Every
CLI line that shows stored text goes through :func:`visible`; JSON output through
:func:`safe_json`.
"""

from __future__ import annotations

import json
from typing import Any

#: Bidirectional formatting characters (Unicode bidi controls): ALM, LRM, RLM, the
#: embeddings and overrides LRE..RLO, and the isolates LRI..PDI.
BIDI_CONTROLS = frozenset({0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F),
                           *range(0x2066, 0x206A)})
#: C0 controls, DEL, C1 controls, the Unicode line and paragraph separators, bidi controls.
UNSAFE = frozenset({*range(0x20), 0x7F, *range(0x80, 0xA0), 0x2028, 0x2029,
                    *BIDI_CONTROLS})


def _escape(code: int) -> str:
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


_VISIBLE = {code: _escape(code) for code in UNSAFE}
#: In JSON strings: ``\\uXXXX`` is a JSON escape, so the text still decodes to the same value.
_JSON_SAFE = {code: f"\\u{code:04x}" for code in UNSAFE}


def visible(text: object) -> str:
    """``text`` with every control character written out (``\\x1b``, ``\\u202e``)."""
    return str(text).translate(_VISIBLE)


def short(text: object, width: int) -> str:
    """:func:`visible` text cut to ``width`` characters (an ellipsis marks the cut)."""
    shown = visible(text)
    return shown if len(shown) <= width else shown[: width - 1] + "…"


def safe_json(value: Any) -> str:
    """JSON of ``value`` that is safe to print: non-ASCII stays readable, controls escaped.

    ``json.dumps(..., ensure_ascii=False)`` escapes only C0 controls; DEL, C1 and bidi
    controls would reach the terminal raw. They can occur only inside JSON strings, where
    ``\\uXXXX`` means the same character.
    """
    return json.dumps(value, ensure_ascii=False).translate(_JSON_SAFE)
