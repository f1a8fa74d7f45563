"""docs/DEVELOPERS.md's map names every folder the repository tracks, each with a line
of its own under "Every folder", and names no folder that is not there (a moved or
deleted folder takes its line with it)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "DEVELOPERS.md"
#: A line of the list: "- `folder/` — its purpose"
ENTRY = re.compile(r"^- `(?P<folder>[^`]+)/` — \S", re.MULTILINE)


def tracked_folders() -> set[str]:
    """Every folder holding a tracked file ("." for the root)."""
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("needs a git checkout")
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True,
                           check=True, timeout=60).stdout.decode().split("\0")
    return {str(Path(f).parent) for f in files if f}


def mapped_folders() -> set[str]:
    """The folders of the "Every folder" list ("." for `./`)."""
    text = DOC.read_text(encoding="utf-8")
    start = text.index("### Every folder")
    section = text[start:text.index("\n## ", start)]
    return {m["folder"] for m in ENTRY.finditer(section)}


def test_every_tracked_folder_is_in_the_map():
    missing = sorted(tracked_folders() - mapped_folders())
    assert missing == [], f"add a line for each to docs/DEVELOPERS.md, Every folder: {missing}"


def test_the_map_names_no_folder_that_is_not_tracked():
    assert sorted(mapped_folders() - tracked_folders()) == []
