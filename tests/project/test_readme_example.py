"""The README's Python example runs as written: enqueue, wait, read the results, against
the test Redis and a real worker process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from novatests.procs import WorkerProc

pytestmark = pytest.mark.slow

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_example() -> str:
    """The one ``python`` block of the README's "Python client" section."""
    section = re.search(r"^## Python client\n(.*?)(?=^## )", README.read_text(),
                        re.DOTALL | re.MULTILINE)
    assert section, "README.md has no '## Python client' section"
    blocks = re.findall(r"```python\n(.*?)```", section.group(1), re.DOTALL)
    assert len(blocks) == 1, blocks
    return blocks[0]


def test_the_readme_python_example_runs_against_a_real_worker(redis_url, namespace, tmp_path):
    store = tmp_path / "store"
    worker = WorkerProc(redis_url, namespace, store.as_uri(), tmp_path / "w", "--app",
                        "synthetic", "--backend", "cpu", "--no-benchmark", name="w")
    env = {**os.environ, "NOVA_REDIS_URL": redis_url, "NOVA_NAMESPACE": namespace,
           "NOVA_STORE_URL": store.as_uri()}
    try:
        res = subprocess.run([sys.executable, "-c", readme_example()], env=env, cwd=tmp_path,
                             capture_output=True, text=True, timeout=300, check=False)
    finally:
        worker.close()
    assert res.returncode == 0, res.stderr[-3000:] + worker.output()[-3000:]
    lines = sorted(res.stdout.splitlines())
    assert len(lines) == 2, res.stdout
    for index, line in enumerate(lines):
        got_index, state, name, backend, size, unit = line.split()
        assert (got_index, state, name, backend, unit) == (str(index), "done", "w", "cpu",
                                                           "bytes"), line
        assert int(size) > 100, line  # a PNG card, read back from the store
    assert len(list(store.rglob("*.png"))) == 2
