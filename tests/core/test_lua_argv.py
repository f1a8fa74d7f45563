"""A claim's arguments have one layout: nova_queue/claim_args.py's ClaimArgs writes them and
lua/includes/claim_argv.lua reads them, in the same order, wherever they come (claim-12,
complete_claim-15, complete_batch-12)."""

from __future__ import annotations

import dataclasses
import json
import re
from importlib import resources

import pytest

from nova_queue.claim_args import ClaimArgs
from nova_queue.scripts import include_source, script_sources

CLAIM_ARGV = (resources.files("nova_queue.lua") / "includes" / "claim_argv.lua").read_text()


def lua_order() -> list[str]:
    """claim_argv's fields by the ARGV slot each is read from (A[at], A[at + 1], ...), the
    attempt ids (from at + 7 on) last."""
    body = CLAIM_ARGV[CLAIM_ARGV.index("local function claim_argv"):]
    slots = {int(m.group(2) or 0): m.group(1)
             for m in re.finditer(r"(\w+) = [^,]*?A\[at(?: \+ (\d+))?\]", body)}
    ids_from = int(re.search(r"for i = at \+ (\d+),", body).group(1))
    assert sorted(slots) == list(range(ids_from)), slots
    return [slots[i] for i in range(ids_from)] + ["attempt_ids"]


def test_the_python_type_writes_what_the_include_reads_in_its_order():
    assert [f.name for f in dataclasses.fields(ClaimArgs)] == lua_order()
    args = ClaimArgs("app", 2, 10_000, 5_000, 100, 120_000, "10.0", ["a", "b"])
    assert args.argv() == ["app", 2, 10_000, 5_000, 100, 120_000, "10.0", "a", "b"]


@pytest.mark.parametrize("at", [1, 4, 14])
def test_the_include_reads_them_back_wherever_they_start(r, at):
    args = ClaimArgs("synthetic", 2, 10_000, 5_000, 100, 120_000, "2.5", ["id1", "id2"])
    argv = ["x"] * (at - 1) + args.argv()
    read = json.loads(r.eval(include_source("claim_argv")
                             + f"\nreturn cjson.encode(claim_argv(ARGV, {at}, 'p', 'w', '9'))",
                             0, *argv))
    expected = dataclasses.asdict(args)
    expected["timeout_factor"] = 2.5
    assert read == {**expected, "prefix": "p", "wid": "w", "maxlen": "9"}


def test_every_claiming_script_reads_the_claim_with_the_one_include():
    for name in ("claim", "complete_claim", "complete_batch"):
        source = script_sources()[name][1]
        assert source.count("local function claim_argv(") == 1, name
        assert "claim_argv(" in source.split("local function claim_argv(", 1)[1], name
    sources = "".join(s for _, s in script_sources().values())
    assert "complete_claim_argv" not in sources
