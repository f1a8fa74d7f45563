"""Formatting shared by the report modules: a missing value, a number, a Markdown table."""

from __future__ import annotations

import math
from typing import Any

NA = "—"


def fmt(x: Any, spec: str = ".2f") -> str:
    """``x`` formatted, or NA for None and NaN."""
    return NA if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table's lines, then a blank line."""
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return out + [""]
