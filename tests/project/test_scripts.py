"""scripts/test (the README's and CI's test command) and its torch choice."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "test"


def _load_cpu_torch():
    spec = importlib.util.spec_from_file_location("cpu_torch", ROOT / "scripts" / "cpu_torch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


cpu_torch = _load_cpu_torch()


def report(version: str | None) -> dict:
    """A ``pip install --dry-run --report`` answer (format version 1) picking ``version``."""
    if version is None:
        return {"version": "1", "install": []}
    return {"version": "1", "install": [{"metadata": {"name": "torch", "version": version},
                                         "download_info": {"url": "file:///x.whl"}}]}


@pytest.mark.parametrize("picked, system, expected", [
    # a CPU build pip already finds (a local wheelhouse): take it as is
    ("2.13.0+cpu", "Linux", ["torch==2.13.0"]),
    # PyPI's Linux wheel bundles CUDA: PyTorch's CPU index instead
    ("2.13.0", "Linux", ["--index-url", cpu_torch.CPU_INDEX, "torch==2.13.0"]),
    (None, "Linux", ["--index-url", cpu_torch.CPU_INDEX, "torch==2.13.0"]),
    ("2.13.0+cu128", "Linux", ["--index-url", cpu_torch.CPU_INDEX, "torch==2.13.0"]),
    # macOS and Windows wheels on PyPI are CPU (and Metal) builds
    ("2.13.0", "Darwin", ["torch==2.13.0"]),
    ("2.13.0", "Windows", ["torch==2.13.0"]),
])
def test_cpu_torch_choice(picked, system, expected):
    assert cpu_torch.choose("2.13.0", report(picked), system) == expected


def test_cpu_torch_needs_a_version():
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "cpu_torch.py")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2 and "usage" in proc.stderr


def test_ci_runs_the_readme_command():
    """.ci/run installs system packages, then hands over to scripts/test; the README names
    the same command."""
    ci = (ROOT / ".ci" / "run").read_text()
    assert ci.rstrip().splitlines()[-1].endswith("exec bash scripts/test")
    assert "python -m pytest" not in ci and "pip install" not in ci  # only scripts/test does
    readme = (ROOT / "README.md").read_text()
    assert "```bash\nscripts/test\n```" in readme
    assert os.access(SCRIPT, os.X_OK)


def test_ci_installs_what_tests_skip_without():
    """.ci/run installs every system package whose absence makes tests skip, including the
    card fonts at the Debian paths the synthetic app looks for first."""
    from nova_queue.workers.apps.card import FONT_FILES

    ci = (ROOT / ".ci" / "run").read_text()
    for package in ("redis-server", "chromium", "docker-compose", "fonts-noto-cjk",
                    "fonts-dejavu-core"):
        assert f"missing+=({package})" in ci, package
    dejavu, noto_cjk = FONT_FILES[:2]
    assert f"[ -f {noto_cjk} ] || missing+=(fonts-noto-cjk)" in ci
    assert f"[ -f {dejavu} ] || missing+=(fonts-dejavu-core)" in ci


def run_script(*args: str) -> subprocess.CompletedProcess:
    """scripts/test in this test's own virtualenv (torch and the project are installed)."""
    env = {**os.environ, "NOVA_VENV": sys.prefix}
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=900, cwd=ROOT, env=env, check=False)


needs_venv = pytest.mark.skipif(sys.prefix == sys.base_prefix,
                                reason="the suite is not running in a virtualenv")


@pytest.mark.slow
@needs_venv
def test_script_passes_pytest_args_and_exit_codes():
    ok = run_script("tests/core/test_keys.py", "-q", "-p", "no:cacheprovider")
    assert ok.returncode == 0, ok.stdout[-2000:] + ok.stderr[-2000:]
    assert "== python -m pytest tests/core/test_keys.py" in ok.stdout
    assert " passed" in ok.stdout
    # installed once, then skipped while pyproject.toml is unchanged
    again = run_script("tests/core/test_keys.py", "-q", "-p", "no:cacheprovider")
    assert again.returncode == 0 and "pip install -e" not in again.stdout
    # pytest's own exit code comes through (4: usage error, a path that does not exist)
    missing = run_script("tests/no_such_file.py", "-p", "no:cacheprovider")
    assert missing.returncode == 4


@pytest.mark.slow
@needs_venv
def test_script_fails_when_no_test_is_collected():
    proc = run_script("tests/core/test_keys.py", "-k", "no_test_has_this_name", "-p",
                      "no:cacheprovider")
    assert proc.returncode == 1
    assert "pytest collected no tests: treating that as a failure" in proc.stderr
