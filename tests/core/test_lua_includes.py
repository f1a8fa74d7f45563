"""The Lua loader (includes of includes, each once, no cycles; codes, wait hints and limits
folded at load), the status codes and wait hints Lua shares with errors.py, and the size of
the pieces scripts are made of."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from nova_queue import errors, protocol
from nova_queue.scripts import (
    IncludeError,
    expand_includes,
    fold_constants,
    include_source,
    layouts,
    script_sources,
)

FOLDER = resources.files("nova_queue.lua")
INCLUDES = FOLDER / "includes"
COMMANDS = sorted(e.name for e in FOLDER.iterdir() if re.match(r"^[a-z_]+-\d+\.lua$", e.name))
INCLUDE_FILES = sorted(e.name for e in INCLUDES.iterdir() if e.name.endswith(".lua"))
#: Longest function, and command body after its header and includes, in lines.
MAX_LINES = 60


def reader(files: dict[str, str]):
    def read(name: str) -> str:
        if name not in files:
            raise FileNotFoundError(name)
        return files[name]
    return read


def inc(*names: str) -> str:
    return "".join(f'--- @include "{n}"\n' for n in names)


# -- the loader ------------------------------------------------------------------------------

def test_includes_of_includes_expand_first_and_once():
    files = {"base": "local function base() end\n",
             "mid": inc("base") + "local function mid() base() end\n",
             "top": inc("base", "mid") + "local function top() mid() end"}  # no final newline
    out = expand_includes(inc("top", "mid", "base") + "return top()\n", "x-0.lua", reader(files))
    assert out == ("local function base() end\n"
                   "local function mid() base() end\n"
                   "local function top() mid() end\n"
                   "return top()\n")


@pytest.mark.parametrize("files, message", [
    ({"a": inc("b"), "b": inc("c"), "c": inc("a")},
     "includes/c.lua:1: include cycle a -> b -> c -> a"),
    ({"a": "-- a\n" + inc("a")}, "includes/a.lua:2: include cycle a -> a"),
    ({"a": inc("nope")}, "includes/a.lua:1: no include named 'nope' (lua/includes/nope.lua)"),
    ({"a": '--- @include common\n'}, "includes/a.lua:1: malformed include line"),
])
def test_bad_includes_are_refused_naming_file_and_line(files, message):
    with pytest.raises(IncludeError) as info:
        expand_includes("-- header\n" + inc("a"), "x-1.lua", reader(files))
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)


def test_every_script_defines_each_function_once():
    for name, (_, source) in script_sources().items():
        defined = re.findall(r"^local function (\w+)", source, re.MULTILINE)
        assert len(defined) == len(set(defined)), name
        assert "@include" not in source, name


#: Includes of small helpers under their own names; every other include is one function
#: named as its file.
LIBRARIES = {"common.lua", "checks.lua"}


@pytest.mark.parametrize("name", INCLUDE_FILES)
def test_each_include_is_one_function_of_its_name_and_used(name):
    defined = functions((INCLUDES / name).read_text())
    if name not in LIBRARIES:
        assert list(defined) == [name.removesuffix(".lua")], name
    used = "".join(source for _, source in script_sources().values())
    for fn in defined:
        assert f"local function {fn}(" in used, f"no script includes {name}"


# -- the pieces stay small -------------------------------------------------------------------

def functions(text: str) -> dict[str, int]:
    """Top-level ``local function`` name -> its length in lines (to its ``end`` at column 0)."""
    out, lines = {}, text.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^local function (\w+)", line)
        if m:
            end = next(j for j in range(i + 1, len(lines)) if re.match(r"^end\b", lines[j]))
            out[m.group(1)] = end - i + 1
    return out


@pytest.mark.parametrize("name", INCLUDE_FILES)
def test_include_functions_are_short(name):
    text = (INCLUDES / name).read_text()
    found = functions(text)
    assert found, f"{name} defines no local function"
    for fn, n in found.items():
        assert n <= MAX_LINES, f"{name}: {fn} is {n} lines"


@pytest.mark.parametrize("name", COMMANDS)
def test_command_bodies_are_short(name):
    text = (FOLDER / name).read_text()
    body = text[text.index("]]\n") + 3:]
    lines = [x for x in body.splitlines() if x.strip() and not x.startswith("--- @include")]
    assert len(lines) <= MAX_LINES, f"{name}: the body after the header is {len(lines)} lines"
    for fn, n in functions(body).items():
        assert n <= MAX_LINES, f"{name}: {fn} is {n} lines"


# -- status codes and wait hints: one definition (errors.py) ---------------------------------

FOLDED = re.compile(r"\((-?[0-9][0-9.e+-]*) --\[\[(?:(CODE|WAIT_MS|PROTOCOL)\.)?"
                    r"([A-Z][A-Z0-9_]*)\]\]\)")


def test_codes_hints_and_limits_are_folded_from_their_one_definition():
    common = (INCLUDES / "common.lua").read_text()
    limits = {}
    for names, values in re.findall(r"^local ([A-Z]\w+(?:, [A-Z]\w+)*) = ([0-9.e+-]+(?:, "
                                    r"[0-9.e+-]+)*)", common, re.MULTILINE):
        limits.update(zip(names.split(", "), values.split(", ")))
    tables = {"CODE": errors.CODES, "WAIT_MS": errors.WAIT_MS, "PROTOCOL": protocol.CONSTANTS}
    seen = set()
    for name, (_, source) in script_sources().items():
        for value, table, word in FOLDED.findall(source):
            expected = tables[table][word] if table else limits[word]
            assert value == str(expected), f"{name}: {table}.{word}"
            seen.add(f"{table}.{word}" if table else word)
        left = re.findall(r"(?<!\w)(?<![^.]\.)(?:CODE|WAIT_MS|PROTOCOL|MAX_[A-Z_]+|MIN_[A-Z_]+|"
                          r"SCORE_\w+)\b",
                          lua_code(source))
        assert not left, f"{name}: not folded: {left}"
    assert {"CODE.WAIT", "CODE.BAD_INPUT", "WAIT_MS.EMPTY", "MAX_CLAIM_K", "PROTOCOL.VERSION"} <= seen


def test_folding_keeps_the_lua_meaning(r):
    """Folded values in every kind of place (negated, concatenated, indexed), comments and
    strings untouched; run by Redis itself."""
    source = fold_constants(
        "--[[ header: CODE.WAIT and MAX_X stay ]]\nlocal MAX_X, MIN_Y = 64, 1e-9 -- limits\n"
        "local t = { 7 }\nt[MAX_X] = 5\n"
        "return { CODE.WAIT, -CODE.BAD_INPUT, WAIT_MS.EMPTY, MAX_X..'|'..CODE.OK, t[MAX_X],"
        " 'CODE.WAIT MAX_X', tostring(MIN_Y * 1e9) } -- CODE.OK", "x-0.lua")
    assert "local MAX_X" not in lua_code(source)
    assert r.eval(source, 0) == [errors.WAIT, -errors.BAD_INPUT, errors.WAIT_MS["EMPTY"],
                                 "64|0", 5, "CODE.WAIT MAX_X", "1"]


@pytest.mark.parametrize("source, message", [
    ("return CODE.NOPE", "x-0.lua: CODE.NOPE is not in nova_queue/errors.py"),
    ("return WAIT_MS.SOON", "x-0.lua: WAIT_MS.SOON is not in nova_queue/errors.py"),
    ("return PROTOCOL.MINOR", "x-0.lua: PROTOCOL.MINOR is not in nova_queue/protocol.py"),
    ("local c = CODE", "x-0.lua: CODE is folded at load: write CODE.<NAME>"),
    ("local MAX_A = 1\nlocal MAX_A = 2", "x-0.lua: constant MAX_A declared twice"),
])
def test_unknown_codes_and_clashing_constants_are_refused(source, message):
    with pytest.raises(IncludeError, match=re.escape(message)):
        fold_constants(source, "x-0.lua")


def test_the_codes_are_distinct_and_those_python_uses():
    assert errors.CODES["WAIT"] == errors.WAIT and errors.CODES["BAD_INPUT"] == errors.BAD_INPUT
    assert len(set(errors.CODES.values())) == len(errors.CODES)


def lua_code(text: str) -> str:
    """Lua source without comments and string literals."""
    text = re.sub(r"--\[\[.*?\]\]", "", text, flags=re.DOTALL)
    text = re.sub(r"'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"", "''", text)
    return re.sub(r"--[^\n]*", "", text)


BARE_CODES = [
    (r"return\s*\{\s*-?\d", "a reply whose status is a number"),
    (r"return\s+-\d", "a negative number returned"),
    (r"\bcode\s*(?:[~=]=|=)\s*-?\d", "a code compared with or set to a number"),
    (r"(?:[<>~]|==)=?\s*-\d", "a comparison with a negative number"),
]


@pytest.mark.parametrize("name", COMMANDS + [f"includes/{n}" for n in INCLUDE_FILES])
def test_no_script_uses_a_bare_numeric_code(name):
    code = lua_code((FOLDER / name).read_text())
    for pattern, what in BARE_CODES:
        m = re.search(pattern, code)
        assert not m, f"{name}: {what} ({m.group(0)!r}); use CODE.<NAME>"


def test_the_bare_code_patterns_catch_the_old_forms():
    old = "return { 2, int(now), 500 }\nreturn -10\nif code ~= 0 then\nif done[1] < -1 then"
    assert all(re.search(p, lua_code(old)) for p, _ in BARE_CODES)
    assert not any(re.search(p, lua_code("return { CODE.OK, -1 } -- return { 0 }"))
                   for p, _ in BARE_CODES)


@pytest.mark.parametrize("name", COMMANDS)
def test_header_codes_are_the_codes_of_errors_py(name):
    text = (FOLDER / name).read_text()
    header = text[: text.index("]]")]
    # "-10 WORKER_LOST" or "{-9, message} (BAD_INPUT)"
    listed = (re.findall(r"(?<![\w\[.])(-?\d+)\s+([A-Z][A-Z_]+)\b", header)
              + re.findall(r"\{(-?\d+),[^}]*\}\s+\(([A-Z][A-Z_]+)\)", header))
    assert listed, f"{name}: the header lists no status code"
    for value, code in listed:
        assert errors.CODES.get(code) == int(value), f"{name}: {value} {code}"


# -- hash layouts: folded at load, like the constants ----------------------------------------

def test_a_layout_folds_into_its_field_list_and_indices(r):
    """unpack(NAME) becomes the fields, NAME.field the field's index, a layout named first in
    another its head; run by Redis itself, on a hash written here."""
    source = fold_constants(
        "local LEASE = { 'state', 'worker' } -- the fence's\n"
        "local COMMIT = { LEASE,\n  'cost' }\n"
        "local t = redis.call('HMGET', KEYS[1], unpack(COMMIT))\n"
        "return { t[COMMIT.cost], t[LEASE.worker], COMMIT.state, 'COMMIT.cost',\n"
        "  #{ unpack(LEASE) } }",
        "x-1.lua")
    assert "'state', 'worker', 'cost'" in source and "local LEASE" not in lua_code(source)
    r.hset("layout-test", mapping={"state": "leased", "worker": "w1", "cost": "2"})
    try:
        assert r.eval(source, 1, "layout-test") == ["2", "w1", 1, "COMMIT.cost", 2]
    finally:
        r.delete("layout-test")


@pytest.mark.parametrize("source, message", [
    ("local A = { 'x' }\nreturn A.y", "x-0.lua: A.y: layout A has no field 'y'"),
    ("local A = { 'x' }\nlocal A = { 'y' }", "x-0.lua: layout A declared twice"),
    ("local A = { B, 'x' }", "x-0.lua: layout A names no layout B"),
    ("local A = { B }\nlocal B = { A }", "x-0.lua: layout cycle"),
    ("local A = { 'x', 'x' }", "x-0.lua: layout A names a field twice"),
    ("local A = { 'x' }\nreturn A", "x-0.lua: layout A is folded at load"),
])
def test_bad_layouts_are_refused(source, message):
    with pytest.raises(IncludeError, match=re.escape(message)):
        fold_constants(source, "x-0.lua")


def test_every_layout_use_is_folded():
    """No script is left with a layout's name (a use the loader did not fold would read a
    global that does not exist)."""
    names = set(layouts((INCLUDES / "common.lua").read_text(), "common.lua"))
    for name, (_, source) in script_sources().items():
        left = {w for w in re.findall(r"(?<![\w.])([A-Z][A-Z0-9_]{2,})\b", lua_code(source))
                if w in names}
        assert not left, f"{name}: not folded: {left}"


# -- a script's size in locals, and one include run alone ------------------------------------

#: Top-level locals of a script as Redis runs it (its functions and values, includes
#: expanded): each function is a closure Redis makes on every call, and Lua allows 200.
#: 125 until verification's free samples and the deadline placement met in complete_batch
#: (128; the claim's instruction counts in docs/BENCHMARKS.md price the closures).
MAX_SCRIPT_LOCALS = 135
#: Top-level locals of a command's own body: its named keys, arguments and results; more
#: is a table of named fields (K, a) or a step of its own.
MAX_BODY_LOCALS = 24


def top_level_locals(text: str) -> list[str]:
    names = []
    for m in re.finditer(r"^local (?:function )?([\w, ]+?)\s*(?:=|\(|$)", lua_code(text),
                         re.MULTILINE):
        names += [n.strip() for n in m.group(1).split(",")]
    return names


@pytest.mark.parametrize("name", COMMANDS)
def test_scripts_keep_few_top_level_locals(name):
    command = name.rsplit("-", 1)[0]
    assert len(top_level_locals(script_sources()[command][1])) <= MAX_SCRIPT_LOCALS, name
    text = (FOLDER / name).read_text()
    assert len(top_level_locals(text[text.index("]]\n") + 3:])) <= MAX_BODY_LOCALS, name


def test_the_locals_count_sees_functions_values_and_lists():
    assert top_level_locals("local a, b = 1, 2\nlocal function f(x)\n  local y = x\nend\n"
                            "local c\n-- local d = 4\n") == ["a", "b", "f", "c"]


def test_an_include_runs_alone(r):
    """include_source: an include with its own includes, folded, as EVAL runs it."""
    source = include_source("worker_apps")
    assert "local function worker_apps" in source and "local function int_in" in source
    assert r.eval(source + "\nreturn worker_apps(ARGV[1])", 0, "a,b,,c") == ["a", "b", "c"]


@pytest.mark.parametrize("name", COMMANDS + [f"includes/{n}" for n in INCLUDE_FILES])
def test_the_finished_states_have_one_definition(name):
    """A job's finished states are is_finished's (common.lua), not spelled out again: no
    condition compares a state with both 'done' and 'failed'."""
    text = (FOLDER / name).read_text()
    code = re.sub(r"--\[\[.*?\]\]|--[^\n]*", "", text, flags=re.DOTALL).replace("\n", " ")
    spelled = re.findall(r"[=~]= '(?:done|failed)'.{0,60}?[=~]= '(?:done|failed)'", code)
    if name == "includes/common.lua":
        assert len(spelled) == 1 and "local function is_finished(state)" in text
    else:
        assert not spelled, f"{name}: {spelled}; use is_finished(state)"
