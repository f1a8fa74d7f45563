"""Shared benchmark plumbing: a private redis-server, polling with deadlines, machine facts.

The redis-server helper mirrors ``tests/redis_fixtures.py`` (benchmarks do not import tests).
"""

from __future__ import annotations

import datetime
import math
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import redis

T = TypeVar("T")
HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def free_port() -> int:
    """A TCP port that was free a moment ago on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _version(binary: str) -> tuple[int, ...]:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True,
                         check=False).stdout
    m = re.search(r"v=(\d+)\.(\d+)\.(\d+)", out)
    return tuple(int(x) for x in m.groups()) if m else (0,)


def find_redis_server() -> str:
    """The newest ``redis-server`` on PATH (``NOVA_BENCH_REDIS_SERVER`` overrides)."""
    if os.environ.get("NOVA_BENCH_REDIS_SERVER"):
        return os.environ["NOVA_BENCH_REDIS_SERVER"]
    found: list[str] = []
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        candidate = shutil.which("redis-server", path=folder)
        if candidate and candidate not in found:
            found.append(candidate)
    if not found:
        sys.exit("redis-server not found on PATH (install Redis >= 6.2)")
    return max(found, key=_version)


class RedisServer:
    """A redis-server child process on a free port, data in a temp folder, no persistence."""

    def __init__(self, binary: str | None = None):
        self.binary = binary or find_redis_server()
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="nova-bench-redis-"))
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout_s: float = 10.0) -> RedisServer:
        """Start and wait until it answers PING."""
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir",
                str(self.dir), "--save", "", "--appendonly", "no",
                "--logfile", str(self.dir / "redis.log")]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        client = redis.Redis(port=self.port, socket_timeout=0.5)

        def ping() -> bool | None:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited: {self.proc.stderr.read().decode()}")
            try:
                return client.ping() or None
            except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
                return None

        wait_for(ping, timeout_s, "redis-server to answer", interval_s=0.02)
        client.close()
        return self

    def client(self, decode: bool = True) -> redis.Redis:
        """A plain redis-py client."""
        return redis.Redis(port=self.port, decode_responses=decode, socket_timeout=60)

    def version(self) -> str:
        return str(self.client().info("server")["redis_version"])

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        shutil.rmtree(self.dir, ignore_errors=True)


def wait_for(predicate: Callable[[], T | None], timeout_s: float, what: str,
             interval_s: float = 0.05) -> T:
    """Poll ``predicate`` until it returns something truthy; TimeoutError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(interval_s)


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (or platform)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info(redis_version: str) -> dict[str, Any]:
    """CPU, cores, RAM, OS, Python, Redis and library versions, and the date."""
    import rq
    from redis.utils import HIREDIS_AVAILABLE

    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        ram = 0
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu_model(), "cores": os.cpu_count(), "ram_gib": round(ram / 2**30, 1),
        "os": f"{platform.system()} {platform.release()}", "python": platform.python_version(),
        "redis": redis_version, "redis_py": redis.__version__, "rq": rq.__version__,
        "hiredis": bool(HIREDIS_AVAILABLE), "load_avg_start": load_avg(),
    }


def load_avg() -> float | None:
    """The 1-minute load average (other work on the machine skews absolute times)."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def redis_cpu_s(client: redis.Redis) -> float:
    """Redis server CPU seconds so far (user + system, main thread and all)."""
    cpu = client.info("cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


def evalsha_stats(client: redis.Redis) -> dict[str, float]:
    """``INFO commandstats`` for EVALSHA (calls, usec) — script time, inner commands included."""
    st = client.info("commandstats")
    ev = st.get("cmdstat_evalsha") or {"calls": 0, "usec": 0}
    return {"calls": int(ev["calls"]), "usec": float(ev["usec"])}


def median(values: list[float]) -> float:
    """The median, ``nan`` for no values."""
    v = sorted(x for x in values if not math.isnan(x))
    if not v:
        return float("nan")
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2


def log(message: str) -> None:
    """Progress line on stderr (the JSON and docs are the results)."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)
