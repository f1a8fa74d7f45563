"""Marked sections of docs/BENCHMARKS.md that other scripts own (txt2img images/s runs).

``benchmarks/run.py`` regenerates the file and keeps every block between
``<!-- keep:NAME -->`` and ``<!-- /keep:NAME -->``; ``txt2img_bench.py --doc`` replaces
its own block (one per backend, model and size) in place or appends it.
"""

from __future__ import annotations

import re
from pathlib import Path

_BLOCK = re.compile(r"<!-- keep:(?P<name>[\w:.x-]+) -->\n.*?<!-- /keep:(?P=name) -->\n", re.DOTALL)


def kept_blocks(text: str) -> list[str]:
    """Every marked block of ``text``, in order."""
    return [m.group(0) for m in _BLOCK.finditer(text)]


def put_block(path: Path, name: str, body: str) -> None:
    """Write ``body`` as block ``name`` of ``path``: replaced where it is, else appended."""
    block = f"<!-- keep:{name} -->\n{body.rstrip()}\n<!-- /keep:{name} -->\n"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    pattern = re.compile(rf"<!-- keep:{re.escape(name)} -->\n.*?<!-- /keep:{re.escape(name)} -->\n",
                         re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    else:
        text = text.rstrip() + "\n\n" + block
    path.write_text(text, encoding="utf-8")
