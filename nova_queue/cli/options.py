"""Parsing helpers shared by commands."""

from __future__ import annotations

from collections.abc import Iterable

from nova_queue.errors import InputError


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
