"""Worker processes for the benchmarks: real ``nova-queue worker`` processes and the
baseline pull / RQ workers of ``pull_worker.py``. Logs go to files in the run's folder."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from benchlib import HERE


@dataclasses.dataclass(frozen=True)
class WorkerClass:
    """A speed class of the simulated fleet: ``slowdown`` × the reference machine's time."""

    name: str
    slowdown: float
    label: str


class Proc:
    """One worker subprocess and its log file."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log_path: Path):
        self.name = name
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(log_path, "wb")  # noqa: SIM115 - open for the process's lifetime
        self.launched = time.time()
        # cwd: the run's folder, so ``python -m nova_queue`` imports the installed package
        # (or PYTHONPATH's), not whatever ./nova_queue the caller's directory holds
        self.popen = subprocess.Popen(argv, env=env, cwd=log_path.parent, stdout=self._log,
                                      stderr=subprocess.STDOUT)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def kill9(self) -> float:
        """SIGKILL now; returns the instant (wall-clock s)."""
        at = time.time()
        self.popen.send_signal(signal.SIGKILL)
        self.popen.wait(10)
        return at

    def stop(self, timeout_s: float = 20.0) -> None:
        """SIGTERM, then SIGKILL if it has not exited in time."""
        if self.alive():
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)
        self._log.close()

    def output(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOVA_")}
    env.update(PYTHONUNBUFFERED="1", **extra)
    return env


def _prewarmed(redis_url: str, go_key: str | None, kind: str, argv: list[str]) -> list[str]:
    if go_key is None:
        return argv
    args = argv[3:] if kind == "nova" else argv[2:]  # drop "python -m nova_queue" / the script
    return [sys.executable, str(HERE / "prewarm.py"), redis_url, go_key, kind, *args]


def start_nova_worker(redis_url: str, namespace: str, store_url: str, folder: Path, name: str,
                      slowdown: float, *, lease_ttl_s: float, heartbeat_s: float,
                      extra: tuple[str, ...] = (), go_key: str | None = None,
                      app: str = "synthetic", env: dict[str, str] | None = None) -> Proc:
    """``python -m nova_queue ... worker --app synthetic --slowdown F`` with its own home
    (and ``env``'s variables); with ``go_key``, pre-warmed and held until a token is pushed
    there (``prewarm.py``)."""
    home = folder / f"home-{name}"
    home.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "nova_queue", "--redis", redis_url, "--namespace", namespace,
            "--store", store_url, "--log-level", "info", "worker", "--app", app,
            "--name", name, "--slowdown", f"{slowdown:g}", *extra]
    argv = _prewarmed(redis_url, go_key, "nova", argv)
    full_env = _env(NOVA_HOME=str(home), NOVA_LEASE_TTL_S=f"{lease_ttl_s:g}",
                    NOVA_HEARTBEAT_INTERVAL_S=f"{heartbeat_s:g}", **(env or {}))
    return Proc(name, argv, full_env, folder / f"{name}.log")


def start_pull_worker(redis_url: str, folder: Path, name: str, slowdown: float, *,
                      store_url: str, ready_key: str, list_key: str | None = None,
                      done_key: str | None = None, rq_queue: str | None = None,
                      startup: bool = True, go_key: str | None = None) -> Proc:
    """A baseline worker (``pull_worker.py``): a list puller or an RQ SimpleWorker;
    ``go_key`` as for :func:`start_nova_worker`."""
    argv = [sys.executable, str(HERE / "pull_worker.py"), "--redis", redis_url, "--name", name,
            "--slowdown", f"{slowdown:g}", "--store", store_url, "--ready-key", ready_key]
    if rq_queue:
        argv += ["--rq", rq_queue]
    else:
        argv += ["--list", str(list_key), "--done-key", str(done_key)]
    if not startup:
        argv.append("--no-startup")
    return Proc(name, _prewarmed(redis_url, go_key, "pull", argv), _env(), folder / f"{name}.log")


def stop_all(procs: list[Proc]) -> None:
    """Stop every process (SIGTERM to all first, so they shut down in parallel)."""
    for p in procs:
        if p.alive():
            p.popen.send_signal(signal.SIGTERM)
    for p in procs:
        p.stop()
