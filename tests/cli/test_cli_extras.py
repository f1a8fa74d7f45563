"""Commands that need an extra say which one, in one line, when it is missing. RQ is the
``post`` extra: ``post-worker`` and ``demo`` (which starts one) exit 1 naming
``pip install 'nova-queue[post]'``, and the rest of the CLI runs without RQ. Real
processes whose ``import rq`` fails as on an install without it (a ``sitecustomize`` on
PYTHONPATH puts None in ``sys.modules['rq']``, which is how Python reports a module it must
not import: ModuleNotFoundError)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from novatests.cli import error_line, nova_env, process_env, run_cli, write

NO_RQ = "the {} needs RQ: pip install 'nova-queue[post]' (rq is missing)"


@pytest.fixture
def without_rq(redis_url: str, namespace: str, tmp_path: Path) -> dict[str, str]:
    """The CLI's environment, with ``import rq`` failing in the process."""
    shim = tmp_path / "no_rq"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text("import sys\nsys.modules['rq'] = None\n")
    return nova_env(redis_url, namespace, tmp_path, PYTHONPATH=str(shim))


def test_the_shim_makes_rq_unimportable(without_rq):
    res = run_cli(["--version"], without_rq)  # the CLI starts without RQ
    assert res.returncode == 0, res.stderr
    probe = subprocess.run([sys.executable, "-c", "import rq"], env=process_env(without_rq),
                           capture_output=True, text=True, timeout=60, check=False)
    assert probe.returncode == 1 and "ModuleNotFoundError" in probe.stderr


def test_post_worker_without_rq_names_the_post_extra(without_rq):
    res = run_cli(["post-worker", "--burst"], without_rq, timeout_s=60)
    assert res.returncode == 1, res.stderr
    assert error_line(res.stderr) == "error: " + NO_RQ.format("post-worker")
    assert "Traceback" not in res.stderr


def test_demo_without_rq_stops_before_starting_anything(without_rq, tmp_path):
    res = run_cli(["demo", "--no-browser", "--data", str(tmp_path / "demo")], without_rq,
                  timeout_s=60)
    assert res.returncode == 1, res.stderr
    assert error_line(res.stderr) == "error: " + NO_RQ.format("demo's post-worker")
    assert not (tmp_path / "demo").exists() and "starting Redis" not in res.stdout


def test_the_core_commands_run_without_rq(without_rq, tmp_path):
    prompts = write(tmp_path, b"one\ntwo\n")
    job = run_cli(["enqueue", str(prompts), "--app", "synthetic"], without_rq)
    assert job.returncode == 0, job.stderr
    status = run_cli(["status", job.stdout.strip()], without_rq)
    assert status.returncode == 0 and "pending" in status.stdout, status.stderr
