"""Host header checks against DNS rebinding: a gallery listening on a loopback address
answers only to loopback names unless NOVA_WEB_TRUSTED_HOSTS says otherwise, for plain
HTTP (no redirect to a spoofed host) and for WebSocket handshakes, on a real server."""

from __future__ import annotations

import http.client
import socket
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import websocket
from novatests.serving import served
from novatests.web import enqueue, unlocked_cookie

from nova_queue import Settings
from nova_queue.web.app import LOOPBACK_HOSTS, make_web_server, trusted_hosts
from nova_queue.web.security import host_trusted

#: A path werkzeug answers with a redirect built from the Host header (merged slashes).
REDIRECTING_PATH = "/static//style.css"


@contextmanager
def serving(settings: Settings, host: str = "127.0.0.1") -> Iterator[int]:
    """``make_web_server`` (what ``nova-queue web`` runs) on a free port; yields the port."""
    with served(make_web_server(settings, host, 0)) as port:
        yield port


def get(port: int, path: str, host: str, addr: str = "127.0.0.1") -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection(addr, port, timeout=10)
    conn.request("GET", path, headers={"Host": host})
    resp = conn.getresponse()
    resp.read()
    conn.close()
    return resp


def ws_status(port: int, path: str, host: str, origin: str) -> int:
    """The handshake's status: 101 when the socket opened (its snapshot arrives). The
    session is unlocked first where ``host`` serves pages (the gallery has a web token)."""
    base = f"http://127.0.0.1:{port}"
    cookie = unlocked_cookie(base, host) if get(port, "/", host).status == 200 else ""
    try:
        ws = websocket.create_connection(f"ws://127.0.0.1:{port}{path}", timeout=10,
                                         host=host, origin=origin, cookie=cookie)
    except websocket.WebSocketBadStatusException as exc:
        return exc.status_code
    try:
        assert '"type": "snapshot"' in ws.recv()
        return 101
    finally:
        ws.close()


@pytest.mark.parametrize("host, trusted", [
    ("localhost", True), ("localhost:8000", True), ("127.0.0.1:1", True), ("[::1]:8000", True),
    ("[::1]", True), ("LocalHost:80", True), ("evil.example", False),
    ("localhost.evil.example", False), ("127.0.0.1.nip.io", False), ("[::2]:8000", False),
    ("", False), ("evil.example:80@localhost", False),
])
def test_loopback_names_with_any_port(host, trusted):
    assert host_trusted(host, LOOPBACK_HOSTS) is trusted


def test_default_trusted_hosts_follow_the_bind_address():
    s = Settings()
    for bind in ("127.0.0.1", "127.0.0.2", "localhost", "::1", "[::1]"):
        assert trusted_hosts(s, bind) == list(LOOPBACK_HOSTS), bind
    for bind in ("0.0.0.0", "::", "192.0.2.10", "gallery.example"):
        assert trusted_hosts(s, bind) is None, bind
    assert trusted_hosts(s) is None  # create_app() under gunicorn: unknown
    configured = Settings(web_trusted_hosts="gallery.example, .example.org")
    assert trusted_hosts(configured, "127.0.0.1") == ["gallery.example", ".example.org"]


def test_loopback_server_refuses_a_spoofed_host_and_never_redirects_to_it(web_settings, nova):
    job = enqueue(nova, ["a"])
    with serving(web_settings) as port:
        resp = get(port, REDIRECTING_PATH, "evil.example")
        assert resp.status == 400 and resp.getheader("Location") is None
        assert get(port, "/", "evil.example").status == 400
        assert get(port, f"/api/jobs/{job}", f"evil.example:{port}").status == 400
        ok = get(port, REDIRECTING_PATH, f"localhost:{port}")
        assert ok.status == 308
        assert ok.getheader("Location") == f"http://localhost:{port}/static/style.css"
        assert get(port, "/", f"127.0.0.1:{port}").status == 200
        assert get(port, "/", f"[::1]:{port}").status == 200


def test_loopback_server_refuses_a_rebound_websocket(web_settings, nova):
    job = enqueue(nova, ["a"])
    with serving(web_settings) as port:
        evil = f"evil.example:{port}"
        # DNS rebinding: the page is on evil.example, which now resolves to 127.0.0.1, so
        # Host and Origin agree; only the host name gives it away.
        assert ws_status(port, f"/ws/jobs/{job}", evil, f"http://{evil}") == 400
        assert ws_status(port, "/ws/events", evil, f"http://{evil}") == 400
        here = f"127.0.0.1:{port}"
        assert ws_status(port, f"/ws/jobs/{job}", here, f"http://{here}") == 101
        local = f"localhost:{port}"
        assert ws_status(port, "/ws/events", local, f"http://{local}") == 101


def test_configured_trusted_hosts_override_the_loopback_default(web_settings, nova):
    settings = Settings(**{**web_settings.__dict__, "web_trusted_hosts": "gallery.example"})
    job = enqueue(nova, ["a"])
    with serving(settings) as port:
        assert get(port, "/", f"localhost:{port}").status == 400
        assert get(port, "/", "gallery.example").status == 200
        host = f"gallery.example:{port}"
        assert ws_status(port, f"/ws/jobs/{job}", host, f"http://{host}") == 101


def test_a_server_on_every_interface_answers_any_host(web_settings):
    with serving(web_settings, host="0.0.0.0") as port:
        assert get(port, "/", "gallery.internal").status == 200


def test_ipv6_loopback_server(web_settings):
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback here")
    with serving(web_settings, host="::1") as port:
        assert get(port, "/", f"[::1]:{port}", addr="::1").status == 200
        assert get(port, "/", "evil.example", addr="::1").status == 400
