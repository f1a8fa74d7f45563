"""TLS: a redis-server with only a TLS port and a certificate from a private CA (made with the
openssl CLI); the client and a real worker run a job over ``rediss://``; clients without the
CA, or without TLS, are refused."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
import urllib.parse
from pathlib import Path

import pytest
import redis
from novatests.chaos.fleet import Fleet, chaos_client, no_tracebacks
from novatests.chaos.history import check

from nova_queue import TaskSpec
from nova_queue.local import free_port, wait_for

pytestmark = pytest.mark.slow


def make_certs(folder: Path) -> dict[str, Path]:
    """A CA and a server certificate for 127.0.0.1 / localhost signed by it."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl CLI not found")
    p = {name: folder / name for name in ("ca.key", "ca.crt", "server.key", "server.csr",
                                          "server.crt", "san.cnf")}
    p["san.cnf"].write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], check=True, capture_output=True, timeout=60)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
        "/CN=nova test CA", "-keyout", str(p["ca.key"]), "-out", str(p["ca.crt"]))
    run("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
        "-keyout", str(p["server.key"]), "-out", str(p["server.csr"]))
    run("x509", "-req", "-in", str(p["server.csr"]), "-CA", str(p["ca.crt"]), "-CAkey",
        str(p["ca.key"]), "-CAcreateserial", "-days", "2", "-extfile", str(p["san.cnf"]),
        "-out", str(p["server.crt"]))
    return p


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
