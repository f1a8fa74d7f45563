"""scripts/test (the README's and CI's test command; its torch choice is
``nova-queue setup-torch``'s, tested in tests/cli/test_setup_torch.py), and scripts/gpu-check
where no GPU is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "test"


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


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_gpu_check_runs_the_steps_asked_for_and_names_the_failed_ones(tmp_path):
    """scripts/gpu-check without a GPU: its GPU tests skip (the backend tests pass), so that
    step passes; verify-threshold --gpu refuses, so the script fails naming that step."""
    out = tmp_path / "out"
    env = {**os.environ, "PYTHON": sys.executable, "GPU_CHECK_OUT": str(out),
           "GPU_CHECK_STEPS": "gpu-tests verify-threshold"}
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "gpu-check")], capture_output=True,
                          text=True, timeout=280, cwd=ROOT, env=env, check=False)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1] == "failed: verify-threshold"
    assert "== gpu-tests: exit 0" in proc.stdout and "bench-eager" not in proc.stdout
    assert "needs a CUDA/ROCm device" in (out / "gpu-tests.log").read_text()
    assert "torch sees no CUDA/ROCm device" in (out / "verify-threshold.log").read_text()
