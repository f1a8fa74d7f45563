"""The benchmark scripts (``benchmarks/``), loaded by path for the tests that check them:
they are scripts that import their siblings, not a package."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[3] / "benchmarks"


def load_bench(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` as a fresh module (its siblings must be importable: put
    :data:`BENCH` on ``sys.path`` first when it imports them)."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
