"""Print the ``pip install`` arguments, one per line, that install torch's CPU build here.

PyPI's Linux torch wheels bundle CUDA (several GB); the CPU build is a tenth of that. If pip
already finds a CPU build (``+cpu``, e.g. in a local wheelhouse) it is taken as is; on Linux
otherwise it comes from PyTorch's CPU index; on macOS and Windows PyPI's wheels are CPU (and
Metal) builds already.

    python scripts/cpu_torch.py 2.13.0     # -> torch==2.13.0  (or --index-url ... torch==...)
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from typing import Any

CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def picked_version(report: dict[str, Any]) -> str | None:
    """The torch version a ``pip install --dry-run --report`` would install, if any."""
    for item in report.get("install", []):
        meta = item.get("metadata", {})
        if str(meta.get("name", "")).lower() == "torch":
            return str(meta.get("version", ""))
    return None


def choose(version: str, report: dict[str, Any], system: str) -> list[str]:
    """pip arguments for torch ``version``, given what pip would pick by default."""
    spec = f"torch=={version}"
    picked = picked_version(report)
    if picked is not None and picked.endswith("+cpu"):
        return [spec]
    if system == "Linux":
        return ["--index-url", CPU_INDEX, spec]
    return [spec]


def dry_run(version: str) -> dict[str, Any]:
    """What plain ``pip install torch==version`` would take (metadata only, nothing
    installed); empty when pip finds none."""
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-deps",
         "--quiet", "--report", "-", f"torch=={version}"],
        capture_output=True, text=True, timeout=600, check=False)
    try:
        return json.loads(proc.stdout) if proc.returncode == 0 else {}
    except json.JSONDecodeError:
        return {}


def main(argv: list[str]) -> int:
    """Entry point: one argument, the torch version."""
    if len(argv) != 1 or not argv[0]:
        print("usage: cpu_torch.py VERSION", file=sys.stderr)
        return 2
    print("\n".join(choose(argv[0], dry_run(argv[0]), platform.system())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
