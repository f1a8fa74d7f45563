"""Loads the Lua commands in ``nova_queue/lua/`` and registers them with a Redis client.

Each file ``<command>-<numkeys>.lua`` is one atomic command. A line ``--- @include "name"``
pulls in ``lua/includes/name.lua`` (one ``local function`` each, as BullMQ's
``src/commands/includes/``), and includes may include includes: each is expanded once per
script, where it is first named, its own includes ahead of its body, so every function is
defined before the code that calls it; naming it again adds nothing, and an include that
reaches itself is an error.

Then named constants are folded into the code (:func:`fold_constants`): the status codes
``CODE.<NAME>`` and claim's wait hints ``WAIT_MS.<NAME>`` from ``errors.py`` and the protocol
version ``PROTOCOL.VERSION`` from ``protocol.py`` (one definition for Lua and Python), and the
limits an include declares as ``local MAX_X = <number>``
(``common.lua``). Redis runs a script's whole chunk on every call, so each ``local`` that a
function captures costs an upvalue per call, found by a walk over the ones already open:
folded, constants cost nothing per call, however many small functions use them.

Scripts are registered with redis-py's ``register_script``, which re-loads a script after
NOSCRIPT (a restart, a failover, or ``SCRIPT FLUSH``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from importlib import resources
from typing import Any

import redis

from nova_queue import errors, protocol

_INCLUDE_RE = re.compile(r'^--- @include "([a-z_]+)"\s*$')
_NAME_RE = re.compile(r"^([a-z_]+)-(\d+)\.lua$")
_NUMBER = r"-?[0-9][0-9.e+-]*"
#: ``local MAX_A, MIN_B = 1, 2e-9 -- comment``: constants, folded into their uses.
_CONSTANT_RE = re.compile(rf"^local ([A-Z][A-Z0-9_]*(?:, [A-Z][A-Z0-9_]*)*) = "
                          rf"({_NUMBER}(?:, {_NUMBER})*)\s*(?:--.*)?$", re.MULTILINE)
#: Comments and strings (kept as they are), ``CODE.X`` / ``WAIT_MS.X`` / ``PROTOCOL.X``,
#: capitalised names (not a field: ``t.MAX_X`` stays, ``'a'..MAX_X`` is folded).
_TOKEN_RE = re.compile(r"""--\[\[.*?\]\]|--[^\n]*|'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"|"""
                       r"(?<!\w)(?<![^.]\.)(?:(CODE|WAIT_MS|PROTOCOL)\.)?([A-Z][A-Z0-9_]*)\b",
                       re.DOTALL)


class IncludeError(ValueError):
    """A script names an include that is missing or malformed, part of a cycle, or a
    constant or code that is not defined."""


@functools.cache
def script_sources() -> dict[str, tuple[int, str]]:
    """``{command: (numkeys, source with includes expanded)}`` for every script."""
    folder = resources.files("nova_queue.lua")
    includes = folder / "includes"

    def read(name: str) -> str:
        return (includes / f"{name}.lua").read_text(encoding="utf-8")

    out: dict[str, tuple[int, str]] = {}
    for entry in folder.iterdir():
        m = _NAME_RE.match(entry.name)
        if not m:
            continue
        body = expand_includes(entry.read_text(encoding="utf-8"), entry.name, read)
        out[m.group(1)] = (int(m.group(2)), fold_constants(body, entry.name))
    return out


def fold_constants(source: str, name: str) -> str:
    """``source`` with ``CODE.<NAME>``, ``WAIT_MS.<NAME>`` and ``PROTOCOL.<NAME>`` (from
    :data:`errors.CODES`, :data:`errors.WAIT_MS` and :data:`protocol.CONSTANTS`) and its own
    ``local MAX_X = <number>`` constants written as ``(<value> --[[<name>]])`` where they are
    used (not in comments or strings); the declarations become comments. Raises IncludeError
    for a name those tables lack, or a constant declared twice with different values."""
    constants: dict[str, str] = {}
    for m in _CONSTANT_RE.finditer(source):
        for const, value in zip(m.group(1).split(", "), m.group(2).split(", "), strict=True):
            if constants.setdefault(const, value) != value:
                raise IncludeError(f"{name}: constant {const} declared twice")
    source = _CONSTANT_RE.sub(lambda m: "-- folded by scripts.py: " + m.group(0), source)
    tables = {"CODE": errors.CODES, "WAIT_MS": errors.WAIT_MS, "PROTOCOL": protocol.CONSTANTS}

    def fold(m: re.Match[str]) -> str:
        table, word = m.group(1), m.group(2)
        if table:
            if word not in tables[table]:
                where = "protocol.py" if table == "PROTOCOL" else "errors.py"
                raise IncludeError(f"{name}: {table}.{word} is not in nova_queue/{where}")
            return f"({tables[table][word]} --[[{table}.{word}]])"
        if word in tables:
            raise IncludeError(f"{name}: {word} is folded at load: write {word}.<NAME>")
        if word in constants:
            return f"({constants[word]} --[[{word}]])"
        return m.group(0)

    return _TOKEN_RE.sub(fold, source)


def expand_includes(source: str, name: str, read: Callable[[str], str]) -> str:
    """``source`` (the file ``name``) with its includes expanded, recursively, each once;
    ``read(include)`` returns an include's text. Raises IncludeError naming file and line."""
    done: set[str] = set()

    def walk(text: str, where: str, chain: tuple[str, ...]) -> str:
        out: list[str] = []
        for lineno, line in enumerate(text.splitlines(keepends=True), 1):
            if "@include" not in line:
                out.append(line)
                continue
            m = _INCLUDE_RE.match(line.rstrip("\n"))
            if not m:
                raise IncludeError(f'{where}:{lineno}: malformed include line, expected '
                                   f'--- @include "name": {line.strip()[:80]}')
            include = m.group(1)
            if include in chain:
                cycle = " -> ".join((*chain[chain.index(include):], include))
                raise IncludeError(f"{where}:{lineno}: include cycle {cycle}")
            if include in done:
                continue
            try:
                body = read(include)
            except FileNotFoundError:
                raise IncludeError(f"{where}:{lineno}: no include named {include!r} "
                                   f"(lua/includes/{include}.lua)") from None
            out.append(walk(body if body.endswith("\n") else body + "\n",
                            f"includes/{include}.lua", (*chain, include)))
            done.add(include)
        return "".join(out)

    return walk(source, name, ())


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

    def shas(self) -> dict[str, str]:
        """``{command: sha}`` of every command (what ``SCRIPT EXISTS`` asks about)."""
        return {name: script.sha for name, script in self._scripts.items()}

    def queue(self, pipe: Any, name: str, keys: list[str], args: list[Any]) -> None:
        """Queue command ``name`` on a redis-py pipeline; its reply comes with ``execute``."""
        if len(keys) != self._numkeys[name]:
            raise ValueError(f"{name} takes {self._numkeys[name]} keys, got {len(keys)}")
        self._scripts[name](keys=keys, args=args, client=pipe)

    def call(self, name: str, keys: list[str], args: list[Any]) -> Any:
        """Run command ``name``; ``keys`` must be exactly as many as its file name says."""
        if len(keys) != self._numkeys[name]:
            raise ValueError(f"{name} takes {self._numkeys[name]} keys, got {len(keys)}")
        return self._scripts[name](keys=keys, args=args)
