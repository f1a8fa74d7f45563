"""TLS: a redis-server with only a TLS port and a certificate from a private CA (made with the
openssl CLI); the client and a real worker run a job over ``rediss://``; clients without the
CA, or without TLS, are refused."""

from __future__ import annotations

import signal
import subprocess
import time
import urllib.parse

import pytest
import redis
from novatests.chaos.fleet import Fleet, chaos_client, no_tracebacks
from novatests.chaos.history import check
from novatests.tls import make_certs

from nova_queue import TaskSpec
from nova_queue.local import free_port, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def tls_redis(tmp_path, redis_server_bin):
    """(port, CA path) of a redis-server that speaks only TLS."""
    certs = make_certs(tmp_path)
    port = free_port()
    proc = subprocess.Popen(
        [redis_server_bin, "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
         "--tls-cert-file", str(certs["server.crt"]), "--tls-key-file", str(certs["server.key"]),
         "--tls-ca-cert-file", str(certs["ca.crt"]), "--tls-auth-clients", "no",
         "--dir", str(tmp_path), "--save", "", "--appendonly", "no"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 10
    try:
        while True:
            if proc.poll() is not None:
                out = proc.stdout.read()
                if "TLS" in out and ("not" in out or "support" in out):
                    pytest.skip(f"this redis-server has no TLS support: {out[-300:]}")
                raise RuntimeError(f"redis-server exited: {out[-2000:]}")
            try:
                redis.Redis(port=port, ssl=True, ssl_ca_certs=str(certs["ca.crt"]),
                            socket_timeout=1).ping()
                break
            except redis.ConnectionError:
                assert time.monotonic() < deadline, "TLS redis-server did not answer"
                time.sleep(0.05)
        yield port, certs["ca.crt"]
    finally:
        proc.kill()
        proc.wait(10)


def test_worker_and_client_over_tls(tls_redis, namespace, tmp_path):
    port, ca = tls_redis
    url = f"rediss://127.0.0.1:{port}/0?" + urllib.parse.urlencode(
        {"ssl_ca_certs": str(ca), "ssl_cert_reqs": "required"})
    nova = chaos_client(url, namespace)
    job = nova.enqueue("synthetic", [TaskSpec(f"tls {i}", 0.05) for i in range(5)],
                       params={"seconds": 0.05, "size": 64})
    fleet = Fleet(url, namespace, (tmp_path / "store").as_uri(), tmp_path / "homes")
    try:
        w = fleet.start("tls", "--no-benchmark")
        wait_for(lambda: nova.job(job, with_tasks=False).finished, timeout_s=60,
                 message=f"job to finish over TLS\n{fleet.logs()}")
        w.signal(signal.SIGTERM)
        assert w.wait(30) == 0
        no_tracebacks([w])
        assert check(nova, [job], expect="done").ok
    finally:
        fleet.close()
        nova.close()
    # without the private CA the server's certificate is not trusted
    untrusted = chaos_client(f"rediss://127.0.0.1:{port}/0", namespace)
    with pytest.raises(redis.ConnectionError, match="certificate verify failed"):
        untrusted.jobs()
    # a plaintext client cannot talk to the TLS port
    plain = redis.Redis.from_url(f"redis://127.0.0.1:{port}/0", socket_timeout=2,
                                 socket_connect_timeout=2)
    with pytest.raises((redis.ConnectionError, redis.TimeoutError)):
        plain.ping()
