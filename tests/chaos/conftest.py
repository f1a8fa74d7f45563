"""Chaos fixtures: short leases, an untrimmed event stream, worker fleets, private Redis
servers, and the session report (``NOVA_CHAOS_REPORT=path`` writes docs/RELIABILITY.md).

``tests/conftest.py`` is inherited (``redis_url``, ``namespace``, ``s3_server``...). The
fleet, the history checker, the proxy, the claim storm and the report are in
``novatests.chaos`` (``tests/lib``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from novatests.chaos.fleet import Fleet, chaos_client
from novatests.chaos.gateway_pool import GatewayPool
from novatests.chaos.history import Verdict
from novatests.chaos.report import Report

from nova_queue import NovaClient
from nova_queue.local import RedisServer

_REPORT = Report()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Collect the strict-xfail tests that ran (the known gaps) for the report."""
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call" and getattr(rep, "wasxfail", ""):
        _REPORT.gaps[item.nodeid] = rep.wasxfail


@pytest.fixture(scope="session")
def chaos_report() -> Iterator[Report]:
    """Every scenario's verdicts; written as Markdown at the end if NOVA_CHAOS_REPORT is set."""
    report = _REPORT
    yield report
    target = os.environ.get("NOVA_CHAOS_REPORT")
    if target and report.rows:
        Path(target).write_text(report.render(), encoding="utf-8")


@pytest.fixture
def record(chaos_report: Report):
    """``record(scenario, verdict, started)``: add a run to the report, then assert it."""

    def add(scenario: int, verdict: Verdict, started: float, runs: int = 1) -> None:
        chaos_report.add(scenario, verdict, time.monotonic() - started, runs)
        assert verdict.ok, verdict.summary()

    return add


@pytest.fixture
def nova_chaos(redis_url: str, namespace: str) -> Iterator[NovaClient]:
    """A chaos-settings NovaClient on the session's Redis, in this test's namespace."""
    client = chaos_client(redis_url, namespace)
    yield client
    client.close()


@pytest.fixture
def fleet(redis_url: str, namespace: str, tmp_path: Path) -> Iterator[Fleet]:
    """Worker processes on the session's Redis with a file store under tmp_path."""
    f = Fleet(redis_url, namespace, (tmp_path / "store").as_uri(), tmp_path / "homes")
    yield f
    f.close()


@pytest.fixture
def private_redis(tmp_path: Path, redis_server_bin: str):
    """``private_redis(*args)``: a redis-server of this test only (stopped at teardown)."""
    servers: list[RedisServer] = []

    def start(*args: str) -> RedisServer:
        folder = tmp_path / f"redis{len(servers)}"
        folder.mkdir()
        server = RedisServer(*args, binary=redis_server_bin, folder=folder).start()
        servers.append(server)
        return server

    yield start
    for s in servers:
        s.stop(kill=True)


@pytest.fixture
def pool(nova_chaos, redis_url, namespace, tmp_path) -> Iterator[GatewayPool]:
    """Gateways and gateway workers (real processes) of one scenario, stopped at teardown."""
    p = GatewayPool(nova_chaos, redis_url, namespace, tmp_path)
    yield p
    p.close()
