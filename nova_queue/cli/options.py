"""Parsing helpers shared by commands."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import click

from nova_queue.errors import InputError

_UNITS_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}
_DURATION_RE = re.compile(r"^(\d{1,12})([smhdw]?)\Z")


class Duration(click.ParamType):
    """A whole number of seconds, or with a unit: ``90m``, ``12h``, ``3d``, ``2w``."""

    name = "duration"

    def __init__(self, max_s: int):
        self.max_s = max_s

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> int:
        if isinstance(value, int):
            seconds = value
        else:
            m = _DURATION_RE.match(str(value).strip().lower())
            if not m:
                self.fail(f"{value!r} is not a duration: seconds, or a number with s, m, h, d "
                          "or w (e.g. 3600, 90m, 12h, 3d)", param, ctx)
            seconds = int(m.group(1)) * _UNITS_S[m.group(2)]
        if not 0 <= seconds <= self.max_s:
            self.fail(f"{value!r} is out of range (0 to {self.max_s} s)", param, ctx)
        return seconds


def parse_pairs(values: Iterable[str], flag: str) -> dict[str, str]:
    """``["a=1", "b=x"]`` -> ``{"a": "1", "b": "x"}``; InputError naming the bad one."""
    out: dict[str, str] = {}
    for value in values:
        key, sep, rest = value.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InputError(f"{flag} {value!r}: expected key=value")
        if key in out:
            raise InputError(f"{flag} {key!r} given twice")
        out[key] = rest.strip()
    return out
