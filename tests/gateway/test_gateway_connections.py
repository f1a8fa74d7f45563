"""A gateway exposed without a proxy: one client address holding ~1,000 idle connections
cannot lock workers out (before, waitress's 1,000 connections were all taken and a real
worker's request on a new connection failed). A real gateway process on waitress, a real
worker, real sockets."""

from __future__ import annotations

import socket

import pytest
from novatests.gateway import GatewayProc, gateway_worker
from novatests.serving import first_bytes

from nova_queue import NovaClient, TaskSpec, tokens
from nova_queue.local import wait_for
from nova_queue.settings import Settings

pytestmark = pytest.mark.slow

#: Idle connections the test opens from one address (127.0.0.2; the worker comes from
#: 127.0.0.1), as the probe did.
IDLE = 1000
PER_CLIENT = Settings().gateway_connections_per_client


def _connect(port: int) -> socket.socket:
    """An idle connection from 127.0.0.2, non-blocking."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10,
                                    source_address=("127.0.0.2", 0))
    sock.setblocking(False)
    return sock


class Answers:
    """The first answer on each of ``socks`` (read once: a second read finds the close)."""

    def __init__(self, socks: list[socket.socket]):
        self.socks, self.first = socks, {}

    def refusals(self) -> list[bytes]:
        for i, sock in enumerate(self.socks):
            if i not in self.first and (got := first_bytes(sock)) is not None:
                self.first[i] = got
        return [a for a in self.first.values() if a.startswith(b"HTTP/1.1 503")]


def test_idle_connections_from_one_address_do_not_lock_out_a_worker(redis_url, namespace,
                                                                   tmp_path):
    admin = NovaClient.from_url(redis_url, namespace=namespace)
    store = (tmp_path / "store").as_uri()
    gw = GatewayProc(redis_url, namespace, store, tmp_path / "gw")
    token = tokens.create(admin, "locked-out")
    job = admin.enqueue("synthetic", [TaskSpec(f"p{i}", 0.01) for i in range(3)],
                        params={"seconds": 0.01, "size": 64})
    idle: list[socket.socket] = []
    w = None
    try:
        idle += [_connect(gw.port) for _ in range(IDLE)]
        w = gateway_worker(gw.url, token, namespace, tmp_path / "w", "--app", "synthetic",
                           "--no-benchmark", "--burst", name="locked-out")
        assert w.wait(90) == 0, w.output()
        assert admin.job(job, with_tasks=False).done == 3
        answers = Answers(idle)
        wait_for(lambda: len(answers.refusals()) >= IDLE - PER_CLIENT, timeout_s=30,
                 interval_s=0.2, message="the refusals to arrive")
        refused = answers.refusals()
        assert len(refused) == IDLE - PER_CLIENT  # the first PER_CLIENT were kept
        assert b"too many connections from this address" in refused[0]
        log = gw.output()
        assert "NOVA_GATEWAY_CONNECTIONS_PER_CLIENT=200" in log and "127.0.0.2" in log
        assert log.count("refused") == 1 and "Traceback" not in log  # one line per minute
    finally:
        for sock in idle:
            sock.close()
        if w is not None:
            w.close()
        gw.close()
        admin.close()


def test_the_cap_can_be_lifted_behind_a_proxy(redis_url, namespace, tmp_path):
    """NOVA_GATEWAY_CONNECTIONS_PER_CLIENT=0 (a proxy in front limits each client): one
    address may hold more connections than the default cap."""
    gw = GatewayProc(redis_url, namespace, (tmp_path / "store").as_uri(), tmp_path / "gw",
                     env={"NOVA_GATEWAY_CONNECTIONS_PER_CLIENT": "0"})
    held: list[socket.socket] = []
    try:
        held += [_connect(gw.port) for _ in range(PER_CLIENT + 50)]
        # every one of them is served: a request on the last gets the gateway's own answer
        last = held[-1]
        last.settimeout(20)
        last.sendall(b"POST /v1/hello HTTP/1.1\r\nHost: gw\r\nContent-Length: 0\r\n\r\n")
        assert last.recv(4096).startswith(b"HTTP/1.1 401")
        assert Answers(held[:-1]).refusals() == [], "a connection was refused"
    finally:
        for sock in held:
            sock.close()
        gw.close()
