"""A worker started before its Redis waits for it; rejected credentials stop it at once.

Real ``nova-queue worker`` subprocesses and real redis-servers on free ports: the server is
started only after the worker said it is waiting.
"""

from __future__ import annotations

import logging
import signal
import threading

import pytest
import redis
from novatests.procs import WorkerProc
from redis.backoff import NoBackoff
from redis.retry import Retry

from nova_queue import NovaClient, TaskSpec
from nova_queue.connection import connect
from nova_queue.local import RedisServer, free_port, wait_for
from nova_queue.workers import redis_wait

PASSWORD = "s3cret-startup-pw"


@pytest.fixture
def procs():
    started: list[WorkerProc] = []
    yield started
    for p in started:
        p.close()


@pytest.fixture
def servers():
    started: list[RedisServer] = []
    yield started
    for s in started:
        s.close()


def start_worker(procs, url, namespace, tmp_path, *args) -> WorkerProc:
    w = WorkerProc(url, namespace, (tmp_path / "store").as_uri(), tmp_path / "home",
                   "--app", "synthetic", *args)
    procs.append(w)
    return w


def waiting(w: WorkerProc) -> bool:
    return "waiting for Redis at" in w.output()


@pytest.mark.slow
def test_worker_started_before_redis_waits_then_joins_and_works(procs, servers, redis_server_bin,
                                                                namespace, tmp_path):
    port = free_port()
    url = f"redis://:{PASSWORD}@127.0.0.1:{port}/0"
    w = start_worker(procs, url, namespace, tmp_path, "--max-tasks", "1")
    wait_for(lambda: waiting(w), timeout_s=90, message="the worker to say it waits")
    assert w.proc.poll() is None
    servers.append(RedisServer(binary=redis_server_bin, port=port, password=PASSWORD).start())
    nova = NovaClient.from_url(url, namespace=namespace)
    try:
        job = nova.enqueue("synthetic", [TaskSpec("after the wait", 0.05)],
                           params={"seconds": 0.05})
        assert w.wait(120) == 0, w.output()  # --max-tasks 1: it joined and did the task
        assert nova.job(job).done == 1
    finally:
        nova.close()
    out = w.output()
    assert out.count(": waiting for Redis at") == 1  # said once; later lines say "still"
    assert f"redis://:***@127.0.0.1:{port}/0" in out and PASSWORD not in out
    # Redis was checked before the backend self-test and the benchmark
    assert out.index("waiting for Redis at") < out.index("benchmark synthetic")
    assert "answered after" in out and "joined" in out
    assert "could not deregister" not in out


@pytest.mark.slow
@pytest.mark.parametrize("user, password, says, detail", [
    ("", "wrong-password", "rejected the credentials", "invalid username-password pair"),
    ("no-ping", "pw-no-ping", "refused a command the worker needs",
     "no permissions to run the 'ping' command"),
])
def test_rejected_credentials_stop_the_worker_at_once(procs, servers, redis_server_bin,
                                                      namespace, tmp_path, user, password,
                                                      says, detail):
    """WRONGPASS and NOPERM: waiting cannot fix them, so exit 1 with one clear line."""
    server = RedisServer(binary=redis_server_bin, password=PASSWORD).start()
    servers.append(server)
    admin = redis.Redis(port=server.port, password=PASSWORD)
    admin.acl_setuser("no-ping", enabled=True, passwords=["+pw-no-ping"], commands=["-@all"])
    admin.close()
    w = start_worker(procs, f"redis://{user}:{password}@127.0.0.1:{server.port}/0", namespace,
                     tmp_path)
    assert w.wait(90) == 1
    out = w.output()
    errors = [line for line in out.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, out  # one clear line
    where = f"redis://{user}:***@127.0.0.1:{server.port}/0"
    assert errors[0].startswith(f"error: Redis at {where} {says}: "), errors[0]
    assert detail in errors[0]
    assert password not in out
    assert "waiting for Redis" not in out  # no retry: waiting cannot fix credentials
    assert "benchmark" not in out and "joined" not in out
    assert "could not deregister" not in out


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_the_wait_promptly(procs, namespace, tmp_path, sig):
    w = start_worker(procs, f"redis://127.0.0.1:{free_port()}/0", namespace, tmp_path)
    wait_for(lambda: waiting(w), timeout_s=90, message="the worker to say it waits")
    w.signal(sig)
    assert w.wait(30) == 0
    out = w.output()
    assert "shutdown requested during start-up" in out
    assert "could not deregister" not in out and "joined" not in out


def test_wait_retries_with_backoff_and_throttled_logs(monkeypatch, caplog):
    """Against a port nobody listens on: many attempts, few log lines, then a stop."""
    monkeypatch.setattr(redis_wait, "FIRST_RETRY_S", 0.01)
    monkeypatch.setattr(redis_wait, "MAX_RETRY_S", 0.04)
    monkeypatch.setattr(redis_wait, "LOG_EVERY_S", 0.5)
    url = f"redis://:{PASSWORD}@127.0.0.1:{free_port()}/0"
    client = connect(url, retry=Retry(NoBackoff(), 0))  # one connect per attempt
    attempts = []

    def ping():
        attempts.append(1)
        return client.ping()

    stop = threading.Event()
    timer = threading.Timer(2.0, stop.set)
    timer.start()
    try:
        with caplog.at_level(logging.INFO, logger=redis_wait.__name__):
            assert redis_wait.wait_for_redis(ping, url, stop) is False
    finally:
        timer.cancel()
        client.close()
    lines = [r.getMessage() for r in caplog.records]
    assert len(attempts) >= 10
    assert sum(m.startswith("waiting for Redis at") for m in lines) == 1
    assert len(lines) <= 1 + 2.0 / 0.5 + 1  # one opening line, then at most one per 0.5 s
    assert all(PASSWORD not in m for m in lines)


def test_wait_returns_at_once_when_redis_answers(redis_url, caplog):
    client = connect(redis_url)
    try:
        with caplog.at_level(logging.INFO, logger=redis_wait.__name__):
            assert redis_wait.wait_for_redis(client.ping, redis_url, threading.Event())
    finally:
        client.close()
    assert caplog.records == []


@pytest.mark.slow
@pytest.mark.parametrize("scheme, rest, says", [
    ("http", "/0", "use redis://, rediss:// (TLS) or unix://"),
    ("redis", "/0?ssl_ca_certs=/ca.pem",
     "unknown option 'ssl_ca_certs' in the query (TLS options need rediss://)"),
])
def test_an_invalid_url_stops_the_worker_at_once(procs, namespace, tmp_path, scheme, rest,
                                                 says):
    port = free_port()
    w = start_worker(procs, f"{scheme}://user:{PASSWORD}@127.0.0.1:{port}{rest}", namespace,
                     tmp_path)
    assert w.wait(90) == 1
    out = w.output()
    expected = f"error: invalid Redis URL '{scheme}://user:***@127.0.0.1:{port}{rest}': {says}"
    assert [line for line in out.splitlines() if line.startswith("error: ")] == [expected]
    assert "Traceback" not in out
    assert PASSWORD not in out and "waiting for Redis" not in out
