"""No function over cyclomatic complexity 20 (radon's count: one per decision, boolean
operator, comprehension and ``except``), in the code, the benchmarks, the scripts and the
tests: a function that needs more branches than that reads better as named steps."""

from __future__ import annotations

from pathlib import Path

from radon.complexity import cc_visit

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("nova_queue", "workers", "web", "benchmarks", "scripts", "tests")
MAX_COMPLEXITY = 20


def too_complex(path: Path, root: Path = ROOT) -> list[str]:
    """The functions and methods of ``path`` over MAX_COMPLEXITY, with their count."""
    found = []
    blocks = list(cc_visit(path.read_text(encoding="utf-8")))
    while blocks:  # classes hold methods and classes, functions their closures
        block = blocks.pop()
        blocks += [*getattr(block, "methods", []), *getattr(block, "inner_classes", []),
                   *getattr(block, "closures", [])]
        if block.complexity > MAX_COMPLEXITY and not hasattr(block, "methods"):
            found.append(f"{path.relative_to(root)}:{block.lineno} {block.fullname}: "
                         f"{block.complexity}")
    return sorted(set(found))


def test_no_function_is_over_the_complexity_limit():
    files = sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py"))
    assert len(files) > 100 and ROOT / "workers" / "execute.py" in files
    assert [f for path in files for f in too_complex(path)] == []


def test_the_check_counts_decisions(tmp_path):
    branches = "".join(f"    if x == {i}:\n        return {i}\n" for i in range(MAX_COMPLEXITY))
    path = tmp_path / "branches.py"
    path.write_text(f"def f(x):\n{branches}    return -1\n")
    assert too_complex(path, tmp_path) == [f"branches.py:1 f: {MAX_COMPLEXITY + 1}"]
    nested = branches.replace("    ", "        ")
    path.write_text(f"class C:\n    def m(self, x):\n{nested}        return -1\n\n"
                    f"def outer():\n    def inner(x):\n{nested}        return -1\n"
                    "    return inner\n")
    inner = path.read_text().splitlines().index("    def inner(x):") + 1
    assert too_complex(path, tmp_path) == [f"branches.py:2 C.m: {MAX_COMPLEXITY + 1}",
                                           f"branches.py:{inner} inner: {MAX_COMPLEXITY + 1}"]
