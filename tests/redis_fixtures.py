"""A private redis-server per test session, and a fresh namespace per test."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis


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
    """The newest ``redis-server`` on PATH (``NOVA_TEST_REDIS_SERVER`` overrides)."""
    if os.environ.get("NOVA_TEST_REDIS_SERVER"):
        return os.environ["NOVA_TEST_REDIS_SERVER"]
    found = []
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        candidate = shutil.which("redis-server", path=folder)
        if candidate and candidate not in found:
            found.append(candidate)
    if not found:
        pytest.exit("redis-server not found on PATH (install Redis >= 6.2)", returncode=2)
    return max(found, key=_version)


class RedisServer:
    """A redis-server child process on a free port, with its data in a temp folder."""

    def __init__(self, *extra: str, binary: str | None = None, port: int | None = None,
                 folder: Path | None = None, password: str | None = None):
        self.binary = binary or find_redis_server()
        self.password = password  # --requirepass; the readiness ping authenticates
        self.port = port or free_port()
        self.dir = folder or Path(tempfile.mkdtemp(prefix="nova-redis-"))
        self.extra = list(extra)
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout_s: float = 10.0) -> RedisServer:
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1",
                "--dir", str(self.dir), "--save", "", "--appendonly", "no",
                "--logfile", str(self.dir / "redis.log"), *self.extra,
                *(["--requirepass", self.password] if self.password else [])]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited: {self.proc.stderr.read().decode()}")
            try:
                redis.Redis(port=self.port, password=self.password, socket_timeout=0.5).ping()
                return self
            except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
                time.sleep(0.02)
        self.stop()
        raise RuntimeError("redis-server did not answer in time")

    def stop(self, kill: bool = False) -> None:
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


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """URL of the session's Redis (``NOVA_TEST_REDIS_URL`` to use an existing one)."""
    if os.environ.get("NOVA_TEST_REDIS_URL"):
        yield os.environ["NOVA_TEST_REDIS_URL"]
        return
    server = RedisServer().start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    """A decoded redis-py client on the session's Redis."""
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def namespace(request: pytest.FixtureRequest) -> str:
    """A namespace no other test uses."""
    base = re.sub(r"[^A-Za-z0-9_-]", "-", request.node.name)[:40]
    return f"t-{base}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def nova(redis_url: str, namespace: str):
    """A NovaClient on the session's Redis, in this test's namespace."""
    from nova_queue import NovaClient

    client = NovaClient.from_url(redis_url, namespace=namespace)
    yield client
    client.close()
