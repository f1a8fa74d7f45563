"""Regenerate docs/RELIABILITY.md from a real run of the chaos suite (about 3 minutes on 2
cores):

    python tests/chaos/report.py                 # writes docs/RELIABILITY.md
    python tests/chaos/report.py --out /tmp/r.md

It runs ``pytest tests/chaos`` with ``NOVA_CHAOS_REPORT`` set; any pytest run with that
variable set writes the table when the session ends (``tests/chaos/conftest.py``, with the
collector and the Markdown in ``tests/lib/novatests/chaos/report.py``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    """Run the chaos suite with NOVA_CHAOS_REPORT set; the suite writes the document."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO / "docs" / "RELIABILITY.md"))
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments")
    args = parser.parse_args(argv)
    env = {**os.environ, "NOVA_CHAOS_REPORT": str(Path(args.out).resolve())}
    cmd = [sys.executable, "-m", "pytest", str(REPO / "tests" / "chaos"), "-q",
           "--durations=10", *args.pytest_args]
    return subprocess.call(cmd, cwd=REPO, env=env)


if __name__ == "__main__":
    sys.exit(main())
