"""Loads the Lua commands in ``nova_queue/lua/`` and registers them with a Redis client.

Each file ``<command>-<numkeys>.lua`` is one atomic command. A line ``--- @include "name"``
pulls in ``lua/includes/name.lua`` (one ``local function`` each, as BullMQ's
``src/commands/includes/``), and includes may include includes: each is expanded once per
script, where it is first named, its own includes ahead of its body, so every function is
defined before the code that calls it; naming it again adds nothing, and an include that
reaches itself is an error.

Then named constants are folded into the code (:func:`fold_constants`): the status codes
``CODE.<NAME>`` and claim's wait hints ``WAIT_MS.<NAME>`` from ``errors.py`` and the protocol
version ``PROTOCOL.VERSION`` from ``protocol.py`` (one definition for Lua and Python), the
limits an include declares as ``local MAX_X = <number>``
(``common.lua``), and the hash layouts it declares as ``local NAME = { 'field', ... }``
(a layout may begin with another's fields: ``{ OTHER, 'field', ... }``): a record read with
``redis.call('HMGET', key, unpack(NAME))`` is that HMGET's reply, its fields read as
``t[NAME.field]``; the loader writes the field list and each index in, and refuses a field
the layout lacks. Redis runs a script's whole chunk on every call, so each ``local`` that a
function captures costs an upvalue per call, found by a walk over the ones already open:
folded, constants and layouts cost nothing per call, however many small functions use them.

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
#: ``local NAME = { 'field', OTHER, ... }`` at the start of a line: a hash layout (fields in
#: HMGET order; a layout name stands for that layout's fields), folded into its uses.
_LAYOUT_RE = re.compile(r"^local ([A-Z][A-Z0-9_]*) = \{((?:\s*(?:'[a-z][a-z0-9_]*'|[A-Z][A-Z0-9_]*)"
                        r"\s*,)*\s*(?:'[a-z][a-z0-9_]*'|[A-Z][A-Z0-9_]*)\s*,?\s*)\}[ \t]*"
                        r"(?:--[^\n]*)?$", re.MULTILINE)
#: Comments and strings (kept as they are), ``unpack(LAYOUT)``, ``LAYOUT.field``,
#: ``CODE.X`` / ``WAIT_MS.X`` / ``PROTOCOL.X``, capitalised names (not a field: ``t.MAX_X``
#: stays, ``'a'..MAX_X`` is folded).
_TOKEN_RE = re.compile(r"""--\[\[.*?\]\]|--[^\n]*|'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"|"""
                       r"(?<![\w.])unpack\(\s*([A-Z][A-Z0-9_]*)\s*\)|"
                       r"(?<!\w)(?<![^.]\.)([A-Z][A-Z0-9_]*)\.([a-z][a-z0-9_]*)\b|"
                       r"(?<!\w)(?<![^.]\.)(?:(CODE|WAIT_MS|PROTOCOL)\.)?([A-Z][A-Z0-9_]*)\b",
                       re.DOTALL)


class IncludeError(ValueError):
    """A script names an include that is missing or malformed, part of a cycle, or a
    constant or code that is not defined."""


def _read_include(name: str) -> str:
    return (resources.files("nova_queue.lua") / "includes" / f"{name}.lua").read_text(
        encoding="utf-8")


@functools.cache
def script_sources() -> dict[str, tuple[int, str]]:
    """``{command: (numkeys, source with includes expanded)}`` for every script."""
    out: dict[str, tuple[int, str]] = {}
    for entry in resources.files("nova_queue.lua").iterdir():
        m = _NAME_RE.match(entry.name)
        if not m:
            continue
        body = expand_includes(entry.read_text(encoding="utf-8"), entry.name, _read_include)
        out[m.group(1)] = (int(m.group(2)), fold_constants(body, entry.name))
    return out


def include_source(name: str) -> str:
    """Include ``name`` alone, as a script would load it (its own includes expanded ahead of
    it, constants and layouts folded): what a test appends a ``return name(...)`` to and
    runs with EVAL, to check one step (the scheduler's arithmetic, say) without a whole
    command."""
    where = f"includes/{name}.lua"
    return fold_constants(expand_includes(f'--- @include "{name}"\n', where, _read_include),
                          where)


def fold_constants(source: str, name: str) -> str:
    """``source`` with ``CODE.<NAME>``, ``WAIT_MS.<NAME>`` and ``PROTOCOL.<NAME>`` (from
    :data:`errors.CODES`, :data:`errors.WAIT_MS` and :data:`protocol.CONSTANTS`), its own
    ``local MAX_X = <number>`` constants written as ``(<value> --[[<name>]])`` where they are
    used, and its layouts (:func:`layouts`): ``unpack(NAME)`` as the layout's field names and
    ``NAME.field`` as ``(<index> --[[NAME.field]])`` (not in comments or strings); the
    declarations become comments. Raises IncludeError for a name those tables lack, a field
    a layout lacks, or a constant or layout declared twice with different values."""
    constants: dict[str, str] = {}
    for m in _CONSTANT_RE.finditer(source):
        for const, value in zip(m.group(1).split(", "), m.group(2).split(", "), strict=True):
            if constants.setdefault(const, value) != value:
                raise IncludeError(f"{name}: constant {const} declared twice")
    fields = layouts(source, name)
    source = _CONSTANT_RE.sub(lambda m: "-- folded by scripts.py: " + m.group(0), source)
    source = _LAYOUT_RE.sub(lambda m: "--[[ folded by scripts.py: " + m.group(0) + " ]]", source)
    tables = {"CODE": errors.CODES, "WAIT_MS": errors.WAIT_MS, "PROTOCOL": protocol.CONSTANTS}

    def fold(m: re.Match[str]) -> str:
        listed, layout, field, table, word = m.group(1, 2, 3, 4, 5)
        if listed or layout:
            known = fields.get(listed or layout)
            if known is None:  # a table such as K.pending, unpack(KEYS)
                return m.group(0)
            if listed:
                return ", ".join(f"'{f}'" for f in known)
            if field not in known:
                raise IncludeError(f"{name}: {layout}.{field}: layout {layout} has no field "
                                   f"{field!r}")
            return f"({known.index(field) + 1} --[[{layout}.{field}]])"
        if table:
            if word not in tables[table]:
                where = "protocol.py" if table == "PROTOCOL" else "errors.py"
                raise IncludeError(f"{name}: {table}.{word} is not in nova_queue/{where}")
            return f"({tables[table][word]} --[[{table}.{word}]])"
        if word in tables:
            raise IncludeError(f"{name}: {word} is folded at load: write {word}.<NAME>")
        if word in fields:
            raise IncludeError(f"{name}: layout {word} is folded at load: write "
                               f"{word}.<field> or unpack({word})")
        if word in constants:
            return f"({constants[word]} --[[{word}]])"
        return m.group(0)

    return _TOKEN_RE.sub(fold, source)


def layouts(source: str, name: str) -> dict[str, list[str]]:
    """The hash layouts ``source`` declares: ``{NAME: [field, ...]}`` in HMGET order, a layout
    named among another's fields expanded in its place. Raises IncludeError for a layout
    declared twice with different fields, an unknown one named, a cycle or a field twice."""
    raw: dict[str, list[str]] = {}
    for m in _LAYOUT_RE.finditer(source):
        items = [x.strip().strip("'") for x in m.group(2).split(",") if x.strip()]
        if raw.setdefault(m.group(1), items) != items:
            raise IncludeError(f"{name}: layout {m.group(1)} declared twice")
    out: dict[str, list[str]] = {}

    def resolve(layout: str, chain: tuple[str, ...]) -> list[str]:
        if layout in chain:
            raise IncludeError(f"{name}: layout cycle {' -> '.join((*chain, layout))}")
        if layout not in out:
            fields: list[str] = []
            for item in raw[layout]:
                if item[0].isupper():
                    if item not in raw:
                        raise IncludeError(f"{name}: layout {layout} names no layout {item}")
                    fields += resolve(item, (*chain, layout))
                else:
                    fields.append(item)
            if len(set(fields)) != len(fields):
                raise IncludeError(f"{name}: layout {layout} names a field twice")
            out[layout] = fields
        return out[layout]

    for layout in raw:
        resolve(layout, ())
    return out


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

    def packed(self, conn: Any, name: str, keys: list[str], args: list[Any]) -> Any:
        """Command ``name`` as ``EVALSHA`` serialized for ``conn.send_packed_command`` (the
        script must be loaded already: a NOSCRIPT reply is not retried here)."""
        if len(keys) != self._numkeys[name]:
            raise ValueError(f"{name} takes {self._numkeys[name]} keys, got {len(keys)}")
        return conn.pack_command("EVALSHA", self._scripts[name].sha, len(keys), *keys, *args)

    def call(self, name: str, keys: list[str], args: list[Any]) -> Any:
        """Run command ``name``; ``keys`` must be exactly as many as its file name says."""
        if len(keys) != self._numkeys[name]:
            raise ValueError(f"{name} takes {self._numkeys[name]} keys, got {len(keys)}")
        return self._scripts[name](keys=keys, args=args)
