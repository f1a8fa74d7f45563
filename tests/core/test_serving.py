"""``nova_queue.serving``, the HTTP serving the gallery and the gateway share, on real
sockets with a plain WSGI app: werkzeug's threaded server (no Nagle delay, bind errors as
OSError, TLS), waitress within its limits (keep-alive, the body limit before the app runs,
idle connections closed, connections capped per client address), and both started, told
to stop and closed the same way."""

from __future__ import annotations

import http.client
import json
import logging
import socket
import ssl
import sys
import threading
import urllib.request

import pytest
from novatests.serving import first_bytes, served
from novatests.tls import make_certs, server_context

from nova_queue import serving
from nova_queue.local import wait_for
from nova_queue.serving import WaitressLimits, waitress_server, werkzeug_server


class Recorder:
    """A WSGI app answering ``ok`` (``/block`` waits for ``release``); it notes each call
    and, on werkzeug, whether the connection sends without Nagle's delay."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.nodelay: list[int] = []
        self.release = threading.Event()

    def __call__(self, environ, start_response):
        self.calls.append(environ["PATH_INFO"])
        conn = environ.get("werkzeug.socket")
        if conn is not None:
            self.nodelay.append(conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        if environ["PATH_INFO"] == "/block":
            self.release.wait(10)
        body = b"ok"
        start_response("200 OK", [("Content-Type", "text/plain"),
                                  ("Content-Length", str(len(body)))])
        return [body]


def get(port: int, path: str = "/") -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def idle(port: int) -> socket.socket:
    """A connection that sends nothing, non-blocking."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.setblocking(False)
    return sock


def test_werkzeug_serves_each_connection_in_a_thread_without_nagle():
    app = Recorder()
    with served(werkzeug_server(app)) as port:
        blocked = threading.Thread(target=get, args=(port, "/block"))
        blocked.start()
        wait_for(lambda: "/block" in app.calls, message="the blocking request")
        assert get(port) == (200, b"ok")  # served while /block still runs
        app.release.set()
        blocked.join(10)
    assert app.nodelay and all(app.nodelay)


def test_werkzeug_answers_a_taken_address_with_oserror():
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        with pytest.raises(OSError):
            werkzeug_server(Recorder(), "127.0.0.1", taken.getsockname()[1])
    finally:
        taken.close()


def test_werkzeug_serves_https_with_a_context(tmp_path):
    certs = make_certs(tmp_path)
    with served(werkzeug_server(Recorder(), ssl_context=server_context(certs))) as port:
        trusted = ssl.create_default_context(cafile=str(certs["ca.crt"]))
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/", context=trusted,
                                    timeout=10) as resp:
            assert resp.read() == b"ok"
        with pytest.raises(urllib.error.URLError):  # the system CAs do not know it
            urllib.request.urlopen(f"https://127.0.0.1:{port}/", timeout=10)


def test_waitress_keeps_a_connection_alive_and_names_itself():
    app = Recorder()
    with served(waitress_server(app, ident="nova-test")) as port:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            conn.request("GET", "/one")
            first = conn.getresponse()
            assert first.read() == b"ok" and first.getheader("Server") == "nova-test"
            sock = conn.sock
            conn.request("GET", "/two")
            assert conn.getresponse().read() == b"ok"
            assert conn.sock is sock  # the same connection
        finally:
            conn.close()
    assert app.calls == ["/one", "/two"]


def test_waitress_refuses_a_body_over_its_limit_before_the_app_runs():
    app = Recorder()
    with served(waitress_server(app, limits=WaitressLimits(max_request_body_bytes=100))) as port:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            conn.request("POST", "/big", body=b"x" * 101)
            resp = conn.getresponse()
            resp.read()
            assert resp.status == 413
        finally:
            conn.close()
        assert get(port, "/small") == (200, b"ok")
    assert app.calls == ["/small"]


def test_waitress_closes_an_idle_connection():
    limits = WaitressLimits(channel_timeout_s=1, cleanup_interval_s=1)
    with served(waitress_server(Recorder(), limits=limits)) as port:
        sock = idle(port)
        try:
            wait_for(lambda: first_bytes(sock) == b"", timeout_s=10, interval_s=0.1,
                     message="the idle connection to be closed")
        finally:
            sock.close()


def test_waitress_caps_connections_per_client_address(caplog):
    limits = WaitressLimits(per_client=3, per_client_setting="NOVA_TEST_CAP")
    caplog.set_level(logging.WARNING, logger="nova_queue.serving")
    with served(waitress_server(Recorder(), limits=limits)) as port:
        held = [idle(port) for _ in range(3)]
        extra = idle(port)
        try:
            refusal = wait_for(lambda: first_bytes(extra), message="the refusal")
            head, _, body = refusal.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 503") and b"Retry-After: 5" in head
            assert json.loads(body) == {"error": "too many connections from this address "
                                                 "(at most 3); retry later",
                                        "kind": "unavailable"}
            assert [first_bytes(s) for s in held] == [None] * 3  # the first three are kept
            held.pop().close()
            # a place is free again: a new connection is served (once the close is seen)
            wait_for(lambda: get(port) == (200, b"ok"), interval_s=0.1,
                     message="a connection to be served again")
        finally:
            for sock in [*held, extra]:
                sock.close()
    [line] = [r.getMessage() for r in caplog.records if r.name == "nova_queue.serving"]
    assert "refused 1 connection(s) past NOVA_TEST_CAP=3 (the last from 127.0.0.1)" in line


def test_waitress_without_a_cap_serves_every_connection():
    with served(waitress_server(Recorder(), limits=WaitressLimits(per_client=0))) as port:
        held = [idle(port) for _ in range(5)]
        try:
            assert get(port) == (200, b"ok")
            assert [first_bytes(s) for s in held] == [None] * 5
        finally:
            for sock in held:
                sock.close()


@pytest.mark.parametrize("server", serving.SERVERS)
def test_serve_until_interrupted_reports_the_port_then_closes_both(server):
    bound = serving.bind(Recorder(), "127.0.0.1", 0, server=server)
    ready, closed = [], threading.Event()
    thread = threading.Thread(target=serving.serve_until_interrupted,
                              args=(bound, ready.append, closed.set), daemon=True)
    thread.start()
    wait_for(lambda: ready, message="on_ready")
    assert ready == [serving.bound_port(bound)]
    assert get(ready[0]) == (200, b"ok")
    serving.stop(bound)
    thread.join(10)
    assert not thread.is_alive() and closed.is_set()
    with pytest.raises(OSError):
        get(ready[0])  # nothing listens any more


def test_stop_ends_a_waitress_loop_whose_trigger_is_closed_already():
    """waitress closes its wake-up trigger with the server (after an error in its accept,
    say); stop must still end the loop (CI once saw stop's wake-up fail with EBADF)."""
    server = waitress_server(Recorder())
    thread = threading.Thread(target=serving.serve_until_interrupted,
                              args=(server, None, lambda: None), daemon=True)
    thread.start()
    server.trigger.pull_trigger(server.trigger.close)  # closed by the loop's own thread
    wait_for(lambda: server.trigger._closed, message="the trigger to be closed")
    # (no request now: waitress's task threads would wake the loop through the closed pipe)
    serving.stop(server)
    thread.join(10)
    assert not thread.is_alive()


def test_the_default_server_is_waitress_when_installed(monkeypatch):
    assert serving.default_server() == "waitress"
    monkeypatch.setitem(sys.modules, "waitress", None)  # as if not installed
    assert serving.default_server() == "werkzeug"
    with pytest.raises(ValueError, match="unknown HTTP server 'gunicorn'"):
        serving.bind(Recorder(), "127.0.0.1", 0, server="gunicorn")
