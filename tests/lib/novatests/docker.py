"""Dockerfiles read statically (there is no Docker engine here): their instructions, and
what the image's final user and folders are (tests/project/test_compose.py,
tests/project/test_docker_volumes.py)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path


def dockerfile(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def final_user(path: Path) -> str:
    """The user the image runs as (its last USER)."""
    users = [rest for word, rest in dockerfile(path) if word == "USER"]
    assert users, f"{path.name} has no USER"
    return users[-1]


def owned_folders(path: Path) -> dict[str, str]:
    """Folders a RUN step gives an owner (``install -d -o USER DIR...`` or ``chown USER
    DIR...``): folder -> owner."""
    out: dict[str, str] = {}
    for word, rest in dockerfile(path):
        if word != "RUN":
            continue
        for step in re.split(r"&&|;", rest):
            args = shlex.split(step)
            if args[:2] == ["install", "-d"]:
                words = iter(args[2:])
                owner, folders = "root", []
                for arg in words:
                    if arg in ("-o", "-g", "-m"):
                        value = next(words)
                        owner = value if arg == "-o" else owner
                    elif not arg.startswith("-"):
                        folders.append(arg)
            elif args[:1] == ["chown"]:
                names = [a for a in args[1:] if not a.startswith("-")]
                owner, folders = names[0].split(":")[0], names[1:]
            else:
                continue
            out.update({folder: owner for folder in folders})
    return out
