"""Every Lua command: named <command>-<numkeys>.lua, header contract first, keys in order."""

import re
from importlib import resources

import pytest

from nova_queue.scripts import script_sources

FOLDER = resources.files("nova_queue.lua")
FILES = sorted(e.name for e in FOLDER.iterdir() if e.name.endswith(".lua"))


def test_expected_commands_exist():
    assert set(script_sources()) == {
        "enqueue", "claim", "renew", "complete", "complete_claim", "complete_batch", "fail", "reap", "cancel", "register",
        "deregister", "retry", "abort", "quarantine", "loaded", "loading", "expire", "purge",
        "repair",
    }


@pytest.mark.parametrize("name", FILES)
def test_header_contract(name):
    text = (FOLDER / name).read_text()
    m = re.match(r"^([a-z_]+)-(\d+)\.lua$", name)
    assert m, f"{name} is not <command>-<numkeys>.lua"
    numkeys = int(m.group(2))
    assert text.startswith("--[["), "the header contract comes first"
    header = text[: text.index("]]")]
    documented = [int(n) for n in re.findall(r"KEYS\[(\d+)\]", header)]
    assert documented == list(range(1, numkeys + 1)), "header lists KEYS[1..N] in order"
    body = text[text.index("]]"):]
    used = {int(n) for n in re.findall(r"KEYS\[(\d+)\]", body)}
    assert used == set(range(1, numkeys + 1)), f"body must use exactly KEYS[1..{numkeys}]"
    assert "ARGV[1]" in header and "Returns" in header
    assert re.search(r"ARGV\[1\]\s+key prefix", header)


def test_includes_exist_and_expand():
    for name, (_, source) in script_sources().items():
        assert "@include" not in source, name
        assert "local function now_ms" in source or name == "abort"
