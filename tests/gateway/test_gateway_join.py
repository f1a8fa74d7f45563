"""Joining a machine with one command: from a checkout, Redis and a real gateway run;
``tokens create NAME --gateway URL`` prints the join commands; they run, as printed, in a
new virtualenv (the only change: ``--no-deps`` on the install, so the test downloads
nothing; the wheel comes from the gateway, the dependencies from this environment); the
worker that joins runs the gateway's release and finishes a job through the gateway."""

from __future__ import annotations

import site
import subprocess
import sys
from pathlib import Path

import pytest
import requests
from novatests.cli import nova_env, run_cli
from novatests.gateway import GatewayProc

from nova_queue import TaskSpec, __version__
from nova_queue.client import NovaClient
from nova_queue.dist import wheel_name
from nova_queue.local import wait_for

pytestmark = pytest.mark.slow


def printed_commands(stdout: str) -> list[str]:
    """The join commands ``tokens create --gateway`` printed (indented lines)."""
    return [line.strip() for line in stdout.splitlines() if line.startswith("  ")]


def wheel_served(url: str) -> str | None:
    """The wheel the gateway serves, None while it makes it; fails if it cannot."""
    answer = requests.get(url + "/v1/dist/", timeout=5)
    assert "cannot serve" not in answer.text, answer.text
    return requests.get(url + "/v1/version", timeout=5).json()["wheel"]


def bash(script: str, env: dict[str, str], timeout_s: float) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-euc", script], env=env, capture_output=True, text=True,
                          timeout=timeout_s, check=False)


def install_in_a_new_venv(install: str, tmp_path: Path) -> dict[str, str]:
    """Run the printed install line in a new virtualenv, with ``--no-deps`` (nothing is
    downloaded; the dependencies it skips come from this environment, after the venv's
    own site-packages); check it installed the gateway's release. Returns the venv's
    environment (PATH first)."""
    venv = tmp_path / "joiner-venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path),
           "NOVA_HOME": str(tmp_path / "joiner"), "PYTHONUNBUFFERED": "1",
           "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_CACHE_DIR": "1"}
    pip = bash(install.replace("pip install ", "pip install --no-deps ", 1), env, 300)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    purelib = Path(bash("python -c 'import sysconfig; print(sysconfig.get_paths()"
                        "[\"purelib\"])'", env, 60).stdout.strip())
    version = bash("python -c 'from importlib.metadata import version; "
                   "print(version(\"nova-queue\"))'", env, 60).stdout.strip()
    assert version == __version__  # the gateway's release
    assert (purelib / "nova_queue" / "lua" / "claim-12.lua").is_file()
    (purelib / "zz_test_deps.pth").write_text("\n".join(site.getsitepackages()))
    return env


@pytest.mark.timeout(900)
def test_a_machine_joins_with_the_printed_commands(redis_url, namespace, tmp_path):
    gw = GatewayProc(redis_url, namespace, (tmp_path / "store").as_uri(), tmp_path / "gw",
                     env={"NOVA_HOME": str(tmp_path / "gw-home")})
    admin = NovaClient.from_url(redis_url, namespace=namespace)
    worker: subprocess.Popen | None = None
    try:
        # the gateway makes its wheel in the background (from this checkout: a build)
        served = wait_for(lambda: wheel_served(gw.url), timeout_s=600, interval_s=0.5,
                          message="the gateway's wheel")
        assert served == wheel_name(__version__)
        res = run_cli(["tokens", "create", "joiner", "--app", "synthetic", "--gateway", gw.url],
                      nova_env(redis_url, namespace, tmp_path), timeout_s=60)
        assert res.returncode == 0, res.stderr
        token = res.stdout.splitlines()[0]
        lines = printed_commands(res.stdout)
        assert lines == [f"python -m pip install 'nova-queue @ {gw.url}/v1/dist/{served}'",
                         f"export NOVA_WORKER_TOKEN={token}",
                         f"nova-queue worker --gateway {gw.url} --app synthetic"]
        install, *run = lines
        env = install_in_a_new_venv(install, tmp_path)
        job = admin.enqueue("synthetic", [TaskSpec(f"joined {i}", 0.05) for i in range(3)],
                            params={"seconds": 0.05, "size": 64})
        # as printed; the worker line exec'd, so that stopping the test stops the worker
        script = "\n".join(["command -v nova-queue >&2", *run[:-1], f"exec {run[-1]}"])
        with open(tmp_path / "worker.log", "wb") as log:
            worker = subprocess.Popen(["bash", "-euc", script], env=env, stdout=log, stderr=log)
            wait_for(lambda: admin.job(job, with_tasks=False).state == "done" or
                     worker.poll() is not None, timeout_s=300, interval_s=0.2,
                     message="the job, run by the joined worker")
        out = (tmp_path / "worker.log").read_text(errors="replace")
        assert admin.job(job, with_tasks=False).state == "done", out
        assert out.splitlines()[0] == env["PATH"].split(":")[0] + "/nova-queue"  # the venv's
        [w] = [w for w in admin.workers() if w.token == "joiner"]
        assert w.labels["nova"] == __version__ and w.worker_id.startswith("joiner.")
        assert {t.worker_id for t in admin.job(job).tasks} == {w.worker_id}
        assert "its gateway runs" not in out  # no release mismatch to report
    finally:
        if worker is not None and worker.poll() is None:
            worker.terminate()
            worker.wait(30)
        admin.close()
        gw.close()
