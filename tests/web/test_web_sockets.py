"""Live sockets cannot take the gallery down: ~150 anonymous sockets (no Origin: not a
browser) used to hold every connection of the web process's Redis pool in their blocking
reads, and every page answered 503. Now one process holds at most NOVA_WEB_LIVE_SOCKETS
(8 per client address), the rest are refused with a 503 that says why, their reads use a
pool of their own, and a gallery with a web token opens them only for an unlocked session.
Real sockets (websocket-client) against a real threaded server."""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
import websocket
from novatests.web import enqueue, unlocked_cookie
from werkzeug.serving import make_server

from nova_queue.local import wait_for
from nova_queue.web import create_app
from nova_queue.web.sockets import PER_CLIENT

#: Sockets the test opens, as the probe did, from this many client addresses (127.0.0.x).
SOCKETS = 150
ADDRESSES = 19


@contextlib.contextmanager
def serving(settings) -> Iterator[tuple[str, object]]:
    """The gallery on a real threaded werkzeug server: (base URL, app)."""
    app = create_app({"SECRET_KEY": "sockets"}, settings=settings, bind_host="127.0.0.1")
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", app
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
        app.extensions["nova"].close()


def open_socket(base: str, path: str, source: str, **kw):
    """A socket from ``source`` (a 127.0.0.x address) without an Origin header; the
    handshake's refusal as the exception websocket-client raises."""
    port = int(base.rsplit(":", 1)[1])
    sock = socket.create_connection(("127.0.0.1", port), timeout=20, source_address=(source, 0))
    try:
        return websocket.create_connection(base.replace("http://", "ws://", 1) + path,
                                           timeout=20, socket=sock, suppress_origin=True, **kw)
    except Exception:
        sock.close()
        raise


@pytest.fixture
def read_only(web_settings):
    """A gallery without a web token: anyone may open sockets (up to the caps)."""
    return dataclasses.replace(web_settings, web_token="")


def test_150_anonymous_sockets_leave_pages_answering(read_only, nova):
    job = enqueue(nova, ["a", "b"])
    held, refused = [], []
    with serving(read_only) as (base, app):
        try:
            for i in range(SOCKETS):
                source = f"127.0.0.{10 + i % ADDRESSES}"
                try:
                    ws = open_socket(base, "/ws/events", source)
                except websocket.WebSocketBadStatusException as exc:
                    refused.append(exc)
                    continue
                assert '"type": "snapshot"' in ws.recv()  # it reads the stream now
                held.append(ws)
            total = read_only.web_live_sockets
            assert len(held) == total and len(refused) == SOCKETS - total
            assert {exc.status_code for exc in refused} == {503}
            body = refused[-1].resp_body.decode()
            assert "too many live connections" in body and "polls instead" in body
            assert refused[-1].resp_headers.get("retry-after") == "30"
            # pages answer while every socket blocks in its read, many at once
            pages = ["/", f"/jobs/{job}", "/workers", "/events", "/api/jobs",
                     "/api/live/events"] * 10
            with ThreadPoolExecutor(16) as pool:
                codes = list(pool.map(lambda p: requests.get(base + p, timeout=30).status_code,
                                      pages))
            assert codes == [200] * len(pages)
            assert app.extensions["nova_sockets"].held == total
        finally:
            for ws in held:
                ws.close()
        # closed sockets give their slots back (each notices within its 1 s read)
        wait_for(lambda: app.extensions["nova_sockets"].held == 0, timeout_s=30,
                 message="the closed sockets' slots to come back")
        ws = open_socket(base, "/ws/events", "127.0.0.10")
        ws.close()


def test_one_address_holds_at_most_per_client_sockets(read_only, nova):
    with serving(read_only) as (base, _):
        held = [open_socket(base, "/ws/events", "127.0.0.7") for _ in range(PER_CLIENT)]
        try:
            with pytest.raises(websocket.WebSocketBadStatusException) as info:
                open_socket(base, "/ws/events", "127.0.0.7")
            assert info.value.status_code == 503
            assert f"{PER_CLIENT} live connections from your address" in \
                info.value.resp_body.decode()
            open_socket(base, "/ws/events", "127.0.0.8").close()  # another address: in
        finally:
            for ws in held:
                ws.close()


def test_a_gallery_with_a_token_opens_sockets_only_for_an_unlocked_session(web_settings,
                                                                          nova):
    job = enqueue(nova, ["a"])
    with serving(web_settings) as (base, app):
        for path in ("/ws/events", f"/ws/jobs/{job}"):
            with pytest.raises(websocket.WebSocketBadStatusException) as info:
                open_socket(base, path, "127.0.0.9")
            assert info.value.status_code == 403
            assert "unlocked session" in info.value.resp_body.decode()
        # a page of a locked session tells its script to poll, not to try a socket
        assert 'data-sockets="off"' in requests.get(base + "/", timeout=10).text
        cookie = unlocked_cookie(base)
        ws = open_socket(base, f"/ws/jobs/{job}", "127.0.0.9", cookie=cookie)
        try:
            assert '"type": "snapshot"' in ws.recv()
        finally:
            ws.close()
        page = requests.get(base + "/", headers={"Cookie": cookie}, timeout=10).text
        assert 'data-sockets="on"' in page
        assert app.extensions["nova_sockets"].held <= 1
