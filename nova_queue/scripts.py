"""Loads the Lua commands in ``nova_queue/lua/`` and registers them with a Redis client.

Each file ``<command>-<numkeys>.lua`` is one atomic command; ``--- @include "name"``
lines pull in ``lua/includes/name.lua`` (shared helpers), as BullMQ does. Scripts are
registered with redis-py's ``register_script``, which re-loads a script after NOSCRIPT
(a restart, a failover, or ``SCRIPT FLUSH``).
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from typing import Any

import redis

_INCLUDE_RE = re.compile(r'^--- @include "([a-z_]+)"\s*$', re.MULTILINE)
_NAME_RE = re.compile(r"^([a-z_]+)-(\d+)\.lua$")


@functools.cache
def script_sources() -> dict[str, tuple[int, str]]:
    """``{command: (numkeys, source with includes expanded)}`` for every script."""
    folder = resources.files("nova_queue.lua")
    out: dict[str, tuple[int, str]] = {}
    for entry in folder.iterdir():
        m = _NAME_RE.match(entry.name)
        if not m:
            continue
        out[m.group(1)] = (int(m.group(2)), _expand(entry.read_text(encoding="utf-8")))
    return out


def _expand(source: str) -> str:
    folder = resources.files("nova_queue.lua") / "includes"

    def include(m: re.Match[str]) -> str:
        return (folder / f"{m.group(1)}.lua").read_text(encoding="utf-8")

    # includes may not include each other; every script lists what it needs in order
    return _INCLUDE_RE.sub(include, source)


class Scripts:
    """The registered commands of one Redis client: ``scripts.claim(keys, args)``."""

    def __init__(self, client: redis.Redis):
        self._numkeys: dict[str, int] = {}
        self._scripts: dict[str, Any] = {}
        for name, (numkeys, source) in script_sources().items():
            self._numkeys[name] = numkeys
            self._scripts[name] = client.register_script(source)

    def load(self, client: redis.Redis) -> dict[str, str]:
        """``SCRIPT LOAD`` every command (an admin does this for restricted worker users,
        which may only ``EVALSHA``); returns ``{command: sha}``."""
        return {name: client.script_load(script.script) for name, script in self._scripts.items()}

    def call(self, name: str, keys: list[str], args: list[Any]) -> Any:
        """Run command ``name``; ``keys`` must be exactly as many as its file name says."""
        if len(keys) != self._numkeys[name]:
            raise ValueError(f"{name} takes {self._numkeys[name]} keys, got {len(keys)}")
        return self._scripts[name](keys=keys, args=args)
