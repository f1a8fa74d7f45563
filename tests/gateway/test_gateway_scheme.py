"""A worker whose gateway URL has the wrong scheme is told so within seconds, in one line
(``https://`` to a plain-HTTP gateway used to wait 30 s per try, for ever; ``http://`` to
an HTTPS one, to retry for ever), and a worker of another release than its gateway is
told which command installs the gateway's (it still joins)."""

from __future__ import annotations

import logging
import subprocess
import threading
import time

import pytest
from novatests.cli import nova_command, process_env
from novatests.gateway import NO_REDIS, NO_STORE, GatewayProc
from novatests.serving import served
from novatests.tls import make_certs, server_context

from nova_queue import Settings, __version__, errors, tokens
from nova_queue.serving import werkzeug_server
from nova_queue.web.gateway import routes
from nova_queue.workers.link import GatewayLink

#: What "within a few seconds" means here (the probes take at most 3 s each).
QUICK_S = 10


def hello(url: str, token: str, **extra) -> dict | None:
    """A worker's join: the link's hello, stopped after QUICK_S if it still waits."""
    stop = threading.Event()
    timer = threading.Timer(QUICK_S, stop.set)
    timer.start()
    try:
        return GatewayLink(Settings(gateway_url=url, worker_token=token, **extra)).hello(stop)
    finally:
        timer.cancel()


def test_https_to_a_plain_http_gateway_is_named_at_once(live_gateway, make_token):
    https = live_gateway.replace("http://", "https://")
    started = time.monotonic()
    with pytest.raises(errors.ConfigError) as info:
        hello(https, make_token("scheme"))
    assert time.monotonic() - started < QUICK_S
    message = str(info.value)
    assert "speaks plain HTTP, not HTTPS" in message and f"--gateway {live_gateway}" in message


@pytest.fixture
def tls_gateway(gw_app, tmp_path):
    """The gateway app on HTTPS (a private CA); (URL, CA path)."""
    certs = make_certs(tmp_path)
    with served(werkzeug_server(gw_app, ssl_context=server_context(certs))) as port:
        yield f"https://127.0.0.1:{port}", str(certs["ca.crt"])


def test_http_to_an_https_gateway_is_named_at_once(tls_gateway, make_token):
    url, ca = tls_gateway
    token = make_token("tls")
    plain = url.replace("https://", "http://")
    started = time.monotonic()
    with pytest.raises(errors.ConfigError) as info:
        hello(plain, token)
    assert time.monotonic() - started < QUICK_S
    assert "speaks HTTPS, not plain HTTP" in str(info.value) and f"--gateway {url}" in str(
        info.value)
    assert hello(url, token, gateway_ca_bundle=ca)["worker_id"].startswith("tls.")  # right one


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_worker_process_says_so_in_one_line(redis_url, namespace, tmp_path, admin):
    """The real worker against a real (waitress) gateway: one error line, exit 1, fast."""
    gw = GatewayProc(redis_url, namespace, (tmp_path / "store").as_uri(), tmp_path / "gw",
                     env={"NOVA_HOME": str(tmp_path / "gw-home")})
    try:
        token = tokens.create(admin, "wrong-scheme")
        env = process_env({"NOVA_REDIS_URL": NO_REDIS, "NOVA_STORE_URL": NO_STORE,
                           "NOVA_HOME": str(tmp_path / "w"), "NOVA_WORKER_TOKEN": token})
        started = time.monotonic()
        proc = subprocess.run(nova_command("worker", "--gateway", gw.url.replace("http:", "https:"),
                                           "--app", "synthetic", "--no-benchmark"),
                              env=env, capture_output=True, text=True, timeout=60, check=False)
        took = time.monotonic() - started
    finally:
        gw.close()
    assert proc.returncode == 1, proc.stderr
    assert took < 30, took  # the interpreter's start included; the check itself is seconds
    expected = (f"error: the gateway at {gw.url.replace('http:', 'https:')} speaks plain HTTP, "
                f"not HTTPS: use --gateway {gw.url} (only on a trusted network), or put a TLS "
                "reverse proxy in front of it")
    assert proc.stderr.strip().splitlines() == [expected]


def test_a_worker_of_another_release_is_told_how_to_match_it(live_gateway, make_token,
                                                            monkeypatch, caplog):
    monkeypatch.setattr(routes, "__version__", "9.9.9")  # the gateway runs another release
    with caplog.at_level(logging.WARNING, logger="nova_queue.workers.link"):
        answer = hello(live_gateway, make_token("older"))
    assert answer is not None and answer["nova"] == "9.9.9"  # it joined all the same
    [record] = [r for r in caplog.records if "its gateway runs" in r.getMessage()]
    message = record.getMessage()
    assert f"runs nova-queue {__version__} but its gateway runs 9.9.9" in message
    assert (f"pip install 'nova-queue @ {live_gateway}/v1/dist/"
            "nova_queue-9.9.9-py3-none-any.whl'") in message
    caplog.clear()
    monkeypatch.setattr(routes, "__version__", __version__)
    with caplog.at_level(logging.WARNING, logger="nova_queue.workers.link"):
        assert hello(live_gateway, make_token("same")) is not None
    assert not [r for r in caplog.records if "its gateway runs" in r.getMessage()]
