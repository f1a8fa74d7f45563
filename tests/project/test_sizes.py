"""Modules stay small and functions short (STYLE.md rule 10): no Python module over 400
lines and no function over 60, unless a ``# long: <why>`` comment says why (for a module,
before its first statement after the docstring and imports; for a function, on the lines
just above its ``def`` or decorators). Lua has its own check (``test_lua_includes.py``)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("nova_queue", "workers", "web", "benchmarks", "scripts", "tests")
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
MARK = "# long:"


def python_files() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py"))


def _reason(line: str) -> bool:
    """A ``# long:`` comment with a reason of a few words."""
    text = line.strip()
    return text.startswith(MARK) and len(text[len(MARK):].split()) >= 3


def _marked_above(lines: list[str], first: int) -> bool:
    """Whether the comment block just above line ``first`` (1-based) holds the mark."""
    i = first - 2
    while i >= 0 and lines[i].strip().startswith("#"):
        if _reason(lines[i]):
            return True
        i -= 1
    return False


def oversized(path: Path, root: Path = ROOT) -> list[str]:
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    tree = ast.parse(text)
    found = []
    if len(lines) > MAX_MODULE_LINES:
        head = next((n.lineno for n in tree.body
                     if not isinstance(n, ast.Import | ast.ImportFrom | ast.Expr)), len(lines))
        if not any(_reason(line) for line in lines[:head]):
            found.append(f"{path.relative_to(root)}: {len(lines)} lines")
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            length = node.end_lineno - first + 1
            if length > MAX_FUNCTION_LINES and not _marked_above(lines, first):
                found.append(f"{path.relative_to(root)}:{node.lineno} {node.name}: "
                             f"{length} lines")
    return found


def test_no_module_or_function_over_the_limits_without_a_reason():
    files = python_files()
    assert len(files) > 100 and ROOT / "nova_queue" / "client" / "worker.py" in files
    assert [f for path in files for f in oversized(path)] == []


def test_the_check_finds_an_unexplained_long_function_and_accepts_a_reason(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    bare = tmp_path / "bare.py"
    bare.write_text(f"def f():\n{body}")
    explained = tmp_path / "explained.py"
    explained.write_text(f"# long: one table of cases, read top to bottom\ndef f():\n{body}")
    assert oversized(bare, tmp_path) == ["bare.py:1 f: 61 lines"]
    assert oversized(explained, tmp_path) == []
    module = tmp_path / "module.py"
    module.write_text('"""doc"""\n\nimport os\n' + "x = 1\n" * MAX_MODULE_LINES)
    assert oversized(module, tmp_path) == [f"module.py: {MAX_MODULE_LINES + 3} lines"]
    module.write_text('"""doc"""\n\nimport os\n# long: one experiment kept together\n'
                      + "x = 1\n" * MAX_MODULE_LINES)
    assert oversized(module, tmp_path) == []
