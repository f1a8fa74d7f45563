"""Fixtures of the benchmark harness tests: the ``benchmarks/`` folder on the path, and a
private redis-server (the harness resets its command statistics)."""

from __future__ import annotations

import pytest
from novatests.bench import BENCH, load_bench

from nova_queue.local import RedisServer


@pytest.fixture
def bench(monkeypatch):
    """``bench(name)``: a module of ``benchmarks/``, importable with its siblings."""
    monkeypatch.syspath_prepend(str(BENCH))
    return load_bench


@pytest.fixture
def server(redis_server_bin):
    """A private redis-server."""
    srv = RedisServer(binary=redis_server_bin).start()
    try:
        yield srv
    finally:
        srv.close()
