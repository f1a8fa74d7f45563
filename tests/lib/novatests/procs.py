"""Start real ``nova-queue worker`` processes for end-to-end tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path


class WorkerProc:
    """One worker subprocess; its log goes to a file (read it when a test fails)."""

    def __init__(self, redis_url: str, namespace: str, store_url: str, home: Path,
                 *args: str, env: dict[str, str] | None = None, name: str = "w"):
        self.log_path = home / f"{name}.log"
        home.mkdir(parents=True, exist_ok=True)
        full_env = {**os.environ, "NOVA_REDIS_URL": redis_url, "NOVA_NAMESPACE": namespace,
                    "NOVA_STORE_URL": store_url, "NOVA_HOME": str(home),
                    "PYTHONUNBUFFERED": "1", **(env or {})}
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "nova_queue", "--log-level", "DEBUG", "worker",
             "--name", name, *args],
            env=full_env, stdout=self.log, stderr=subprocess.STDOUT)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def wait(self, timeout_s: float = 30) -> int:
        return self.proc.wait(timeout_s)

    def output(self) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            self.proc.kill()
            self.proc.wait(10)
        self.log.close()
