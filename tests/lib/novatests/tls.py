"""Certificates for TLS tests: a private CA and a server certificate signed by it (the
openssl CLI; the test is skipped without it)."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from pathlib import Path

import pytest


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


def server_context(certs: dict[str, Path]) -> ssl.SSLContext:
    """A server-side TLS context with the certificate :func:`make_certs` made."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(certs["server.crt"], certs["server.key"])
    return ctx
