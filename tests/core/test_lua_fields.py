"""Hash fields by name in the Lua scripts: every HMGET names what it reads right there, as a
layout of ``common.lua`` (``redis.call('HMGET', key, unpack(LAYOUT))``, its fields read as
``t[LAYOUT.field]``, folded at load) or as locals (``local state, app = unpack(redis.call(
'HMGET', key, 'state', 'app'))``) whose names agree with the fields, in number and in order;
the fields are those ``nova_queue/keys.py`` documents for the hash; and what is left of reads
by position (``t[3]``) stays under a cap."""

from __future__ import annotations

import re
from importlib import resources

import pytest

import nova_queue.keys as keys_module
from nova_queue.scripts import layouts

FOLDER = resources.files("nova_queue.lua")
INCLUDES = FOLDER / "includes"
FILES = sorted([e.name for e in FOLDER.iterdir() if re.match(r"^[a-z_]+-\d+\.lua$", e.name)]
               + [f"includes/{e.name}" for e in INCLUDES.iterdir() if e.name.endswith(".lua")])
COMMON = (INCLUDES / "common.lua").read_text()
LAYOUTS = layouts(COMMON, "common.lua")
#: HMGETs of a list built at run time: one value per owner, per model, per copied field, or
#: the fields a job's requirements and model call for; each is read by its loop's index.
DYNAMIC = {"includes/owner_order.lua", "includes/prefer_model.lua",
           "includes/take_over_identity.lua", "includes/fastest_others.lua"}
#: Reads by a literal index (``x[3]``) left in all the scripts' code, KEYS and ARGV aside:
#: a list's first element, a reply's one entry, an argument layout's slots.
MAX_POSITIONAL = 100


def code_of(text: str) -> str:
    """Lua source without comments (strings kept: they are the field names)."""
    text = re.sub(r"--\[\[.*?\]\]", "", text, flags=re.DOTALL)
    return re.sub(r"--[^\n]*", "", text)


def read(name: str) -> str:
    return (FOLDER / name).read_text()


def call_args(code: str, start: int) -> tuple[list[str], int]:
    """The top-level comma-separated arguments of the call whose ``(`` is at ``start``, and
    the index just past its ``)``."""
    depth, args, cur, i = 0, [], "", start
    while True:
        ch = code[i]
        if ch in "'\"":
            end = code.index(ch, i + 1)
            cur += code[i:end + 1]
            i = end + 1
            continue
        if ch in "({[":
            depth += 1
            if depth == 1:
                i += 1
                continue
        elif ch in ")}]":
            depth -= 1
            if depth == 0:
                args.append(cur.strip())
                return args, i + 1
        elif ch == "," and depth == 1:
            args.append(cur.strip())
            cur = ""
            i += 1
            continue
        cur += ch
        i += 1


def hmgets(name: str) -> list[tuple[list[str], list[str] | None]]:
    """Each HMGET of file ``name``: (its arguments after 'HMGET', the names it is unpacked
    into, or None when it is not unpacked into names)."""
    return list(_hmgets_of(code_of(read(name))))


def _hmgets_of(code: str):
    for m in re.finditer(r"redis\.call\(\s*'HMGET'", code):
        args, _ = call_args(code, m.start() + len("redis.call"))
        before = code[:m.start()]
        u = before.rfind("unpack(")
        between = before[u + len("unpack("):] if u >= 0 else "x"
        names = None  # unpacked right there, or under a condition: unpack(x and HMGET or {})
        if u >= 0 and (between.strip() == "" or re.search(r"\band\s*$", between)):
            head = re.search(r"(?:local\s+)?((?:[A-Za-z_][\w.]*\s*,\s*)*[A-Za-z_][\w.]*)\s*=\s*$",
                             before[:u])
            names = [n.strip() for n in head.group(1).split(",")] if head else None
        yield args[1:], names


def field_base(field: str) -> str | None:
    """``'state'`` -> state, ``'ema:' .. app`` -> ema; None for anything else."""
    m = re.fullmatch(r"'([a-z_][a-z0-9_]*)'|'([a-z_][a-z0-9_]*):'\s*\.\.\s*.+", field)
    return (m.group(1) or m.group(2)) if m else None


def agrees(name: str, base: str) -> bool:
    """A local agrees with its field when it is the field's name, or that name with a
    qualifier before or after it (``job_state``, ``loser_ema``, ``f_field``)."""
    leaf = name.split(".")[-1]
    return leaf == base or leaf.endswith("_" + base) or leaf.startswith(base + "_")


@pytest.mark.parametrize("name", FILES)
def test_every_hmget_names_its_fields(name):
    for args, names in hmgets(name):
        key, fields = args[0], args[1:]
        if len(fields) == 1 and re.fullmatch(r"unpack\(([A-Z][A-Z0-9_]*)\)", fields[0]):
            layout = fields[0][len("unpack("):-1]
            assert layout in LAYOUTS, f"{name}: HMGET of {key} reads unknown layout {layout}"
            continue
        if any(f.startswith("unpack(") for f in fields):
            assert name in DYNAMIC, f"{name}: HMGET of {key} reads a list built at run time"
            continue
        bases = [field_base(f) for f in fields]
        assert None not in bases, f"{name}: HMGET of {key}: a field that is not a name: {fields}"
        assert names is not None, (f"{name}: HMGET of {key} ({', '.join(fields)}) is read by "
                                   "position: unpack it into named locals, or read a layout")
        assert len(names) == len(fields), f"{name}: {names} = HMGET {fields}"
        for local, base in zip(names, bases, strict=True):
            assert agrees(local, base), f"{name}: local {local} reads field {base}"


def test_the_checks_catch_a_read_by_position_and_a_misnamed_local():
    def problems(code: str) -> list[str]:
        found = []
        for args, names in _hmgets_of(code):
            bases = [field_base(f) for f in args[1:]]
            if names is None:
                found.append("position")
            elif len(names) != len(bases) or not all(map(agrees, names, bases)):
                found.append("names")
        return found

    assert problems("local t = redis.call('HMGET', k, 'state', 'app')\nreturn t[2]") == [
        "position"]
    assert problems("local app, state = unpack(redis.call('HMGET', k, 'state', 'app'))") == [
        "names"]
    assert problems("local state = unpack(redis.call('HMGET', k, 'state', 'app'))") == ["names"]
    assert problems("local job_state, n = unpack(x and redis.call('HMGET', k, 'state',\n"
                    "  'n:' .. app) or {})") == []



# -- the fields are the schema's (nova_queue/keys.py) ----------------------------------------

def schema_fields(hash_template: str) -> set[str]:
    """The fields keys.py's docstring lists for ``job:<job>``, ``task:<job>:<index>`` or
    ``worker:<wid>`` (a per-app field ``ema:<app>`` as ``ema``; a task's backup attempt's
    fields as ``b_`` and the primary's name)."""
    doc = keys_module.__doc__
    start = doc.index(f"- ``{hash_template}``:")
    end = doc.index("\n- ``", start + 1)
    words = set()
    for token in re.findall(r"``([^`]+)``", doc[start:end]):
        for w in token.split():
            words.add(w.split(":")[0])
    if hash_template.startswith("task"):
        words |= {"b_" + w for w in words}
    return words


HASHES = {"job": "job:<job>", "task": "task:<job>:<index>", "worker": "worker:<wid>"}


def hash_of_key(key: str) -> str | None:
    """Which hash a key expression names: job, task or worker (None when it does not say)."""
    for kind in ("task", "job", "worker"):
        if re.search(rf"\b{kind}_key\b|\bK\.{kind}\b|'{kind}:'", key):
            return kind
    return None


def test_each_layout_reads_fields_of_the_hash_its_comment_names():
    comment = None
    for line in COMMON.splitlines():
        if line.startswith("-- "):
            m = re.match(r"-- (job:<job>|task:<job>:<index>|worker:<wid>)", line)
            comment = m.group(1) if m else comment
            continue
        m = re.match(r"^local ([A-Z][A-Z0-9_]*) = \{", line)
        if m and m.group(1) in LAYOUTS:
            assert comment, f"layout {m.group(1)}: no comment names its hash"
            missing = set(LAYOUTS[m.group(1)]) - schema_fields(comment)
            assert not missing, f"layout {m.group(1)} of {comment}: not in keys.py: {missing}"
    assert {"CLAIM_JOB", "COMMIT_TASK", "LEASE", "ATTEMPT"} <= set(LAYOUTS)


@pytest.mark.parametrize("name", FILES)
def test_named_reads_are_fields_the_schema_documents(name):
    for args, _ in hmgets(name):
        kind = hash_of_key(args[0])
        bases = [field_base(f) for f in args[1:]]
        if kind and None not in bases:
            missing = set(bases) - schema_fields(HASHES[kind])
            assert not missing, f"{name}: {kind} hash fields not in keys.py: {missing}"


def test_a_backups_attempt_is_the_primarys_fields_prefixed():
    assert LAYOUTS["BACKUP_ATTEMPT"] == ["b_" + f for f in LAYOUTS["ATTEMPT"]]
    # a record a fence reads, whatever the path, begins with the fence's fields
    for name in ("COMMIT_TASK", "RENEW_TASK", "FAIL_TASK"):
        assert LAYOUTS[name][:len(LAYOUTS["LEASE"])] == LAYOUTS["LEASE"], name
    assert LAYOUTS["COMMIT_JOB"][:len(LAYOUTS["JOB_COUNTS"])] == LAYOUTS["JOB_COUNTS"]


def test_reads_by_position_stay_few():
    found = []
    for name in FILES:
        code = re.sub(r"'(?:[^'\\\n]|\\.)*'", "''", code_of(read(name)))
        found += [f"{name}: {m.group(0)}" for m in re.finditer(r"\b([A-Za-z_]\w*)\[\d+\]", code)
                  if m.group(1) not in ("KEYS", "ARGV")]
    assert len(found) <= MAX_POSITIONAL, "\n".join(found)
