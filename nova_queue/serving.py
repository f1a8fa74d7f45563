"""HTTP serving: the one place that binds a socket and runs a WSGI app on it, for the
gallery (``nova-queue web``) and the gateway (``nova-queue gateway``).

Two servers (:data:`SERVERS`):

- werkzeug's threaded server (:func:`werkzeug_server`): one thread per connection (a
  WebSocket holds one), each connection closed after one answer; answers go out without
  Nagle's delay; TLS with an ``ssl.SSLContext`` (the tests' HTTPS gateways). ``nova-queue
  web`` runs on it, and the gateway without waitress or with ``--server werkzeug``.
- waitress (:func:`waitress_server`, ``nova-queue[gateway]``): HTTP/1.1 keep-alive, a fixed
  pool of threads, a request's body buffered up to a limit before the app runs (413
  above), idle connections closed, at most so many connections per client address
  (:func:`capped_channel`); the limits are one :class:`WaitressLimits`.

:func:`serve_until_interrupted` runs either until Ctrl-C (or SIGTERM made one), then closes
the server and calls the app's own ``close``. This module takes any WSGI callable: it
imports neither Flask nor the layers that serve (web, gateway), and waitress only when it
serves on it (``tests/project/test_layering.py``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import socket
import ssl
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from werkzeug.serving import (
    BaseWSGIServer,
    WSGIRequestHandler,
    get_sockaddr,
    make_server,
    select_address_family,
)

from nova_queue.clientaddr import client_name

log = logging.getLogger(__name__)

#: The HTTP servers: waitress (``nova-queue[gateway]``), werkzeug's threaded one.
SERVERS = ("waitress", "werkzeug")
#: Connections the kernel queues for werkzeug's server before it accepts them.
LISTEN_BACKLOG = 128
#: A refusal past the per-client cap is logged at most this often (with the count since).
REFUSAL_LOG_EVERY_S = 60.0

WSGIApp = Callable[..., Any]


@dataclasses.dataclass(frozen=True)
class WaitressLimits:
    """What one waitress server holds at most.

    ``threads``: requests served at once (a gateway claim's long poll holds one for up to
    10 s). ``connection_limit``: connections open in all. ``channel_timeout_s``: an idle
    connection (no request in progress, nothing received) is closed after this long
    (waitress's default is 120 s; a worker's link reconnects), looked for every
    ``cleanup_interval_s``. ``max_request_body_bytes``: a larger body is answered 413
    before the app runs (None: waitress's own 1 GiB). ``per_client``: connections one
    client address (an IPv6 one by its /64) may hold; 0 for no cap; ``per_client_setting``
    the setting that sets it, named in the log line of a refusal."""

    threads: int = 64
    connection_limit: int = 1000
    channel_timeout_s: int = 30
    cleanup_interval_s: int = 10
    max_request_body_bytes: int | None = None
    per_client: int = 0
    per_client_setting: str = "the per-client cap"


def default_server() -> str:
    """waitress when it is installed, else werkzeug."""
    try:
        import waitress  # noqa: F401
    except ImportError:
        return "werkzeug"
    return "waitress"


class _NoDelayHandler(WSGIRequestHandler):
    """Sends each answer without Nagle's delay: werkzeug writes the headers and the body
    separately, and a small second write waits for the peer's delayed ACK (up to 40 ms)."""

    def setup(self) -> None:
        super().setup()
        if self.connection.family in (socket.AF_INET, socket.AF_INET6):
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def werkzeug_server(app: WSGIApp, host: str = "127.0.0.1", port: int = 0, *,
                    ssl_context: ssl.SSLContext | None = None) -> BaseWSGIServer:
    """werkzeug's threaded server for ``app``, bound but not yet serving (``.port`` is the
    bound port; ``serve_forever``, ``shutdown`` and ``server_close`` as usual); HTTPS with
    ``ssl_context``. Raises OSError when the address cannot be bound."""
    # Bind here: werkzeug prints and calls sys.exit when it fails to bind by itself.
    family = select_address_family(host, port)
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(get_sockaddr(host, port, family))
        sock.listen(LISTEN_BACKLOG)
        return make_server(host, port, app, threaded=True, fd=sock.fileno(),
                           request_handler=_NoDelayHandler, ssl_context=ssl_context)
    finally:
        sock.close()  # the server holds its own duplicate of the socket


def waitress_server(app: WSGIApp, host: str = "127.0.0.1", port: int = 0,
                    limits: WaitressLimits | None = None, *, ident: str = "nova-queue") -> Any:
    """A waitress server for ``app`` within ``limits``, bound but not yet serving
    (``.effective_port``, ``run()``, ``close()``); ``ident`` is its Server header. Raises
    OSError when the address cannot be bound, ImportError without waitress."""
    from waitress.server import create_server

    limits = limits or WaitressLimits()
    extra = ({} if limits.max_request_body_bytes is None
             else {"max_request_body_size": limits.max_request_body_bytes})
    server = create_server(app, host=host, port=port, threads=limits.threads,
                           connection_limit=limits.connection_limit, ident=ident,
                           channel_timeout=limits.channel_timeout_s,
                           cleanup_interval=limits.cleanup_interval_s,
                           clear_untrusted_proxy_headers=True, **extra)
    if limits.per_client:
        channel = capped_channel(limits.per_client, limits.per_client_setting)
        # create_server gives one server, or one per address a host name resolves to
        for each in [server, *(getattr(server, "map", None) or {}).values()]:
            if hasattr(each, "active_channels"):
                each.channel_class = channel
    return server


def bind(app: WSGIApp, host: str, port: int, *, server: str = "werkzeug",
         limits: WaitressLimits | None = None, ident: str = "nova-queue") -> Any:
    """``app`` bound on ``server`` (one of :data:`SERVERS`); ``limits`` and ``ident`` are
    waitress's."""
    if server == "waitress":
        return waitress_server(app, host, port, limits, ident=ident)
    if server == "werkzeug":
        return werkzeug_server(app, host, port)
    raise ValueError(f"unknown HTTP server {server!r}: one of {', '.join(SERVERS)}")


def bound_port(server: Any) -> int:
    """The port a server of either kind listens on (waitress on a host name of several
    addresses: its first one's)."""
    if isinstance(server, BaseWSGIServer):
        return int(server.port)
    if hasattr(server, "effective_port"):
        return int(server.effective_port)
    return int(server.effective_listen[0][1])


def serve_until_interrupted(server: Any, on_ready: Callable[[int], None] | None,
                            close: Callable[[], None]) -> None:
    """Tell ``on_ready`` the bound port, serve until interrupted (or :func:`stop`), then
    close the server and call ``close`` (the app's connections)."""
    if on_ready is not None:
        on_ready(bound_port(server))
    try:
        if isinstance(server, BaseWSGIServer):
            server.serve_forever()
        else:
            _run_waitress(server)
    finally:
        if isinstance(server, BaseWSGIServer):
            server.server_close()
        else:
            server.close()
            server.task_dispatcher.shutdown()  # done already after Ctrl-C: then at once
        close()


#: waitress servers :func:`stop` was called for (their loops end at their next turn)
_STOPPING: weakref.WeakSet[Any] = weakref.WeakSet()


def _channels(server: Any) -> dict[int, Any]:
    """A waitress server's socket map: its listening socket(s), trigger and connections."""
    return getattr(server, "map", None) or server._map


def _run_waitress(server: Any) -> None:
    """waitress's ``run()``, with a turn that ends it: after :func:`stop`, the loop's own
    thread closes every channel (waitress's loop is not thread-safe) and returns. Ctrl-C
    ends it too, as in ``run()``."""
    from waitress import wasyncore

    channels, adj = _channels(server), server.adj
    try:
        while channels and server not in _STOPPING:
            wasyncore.loop(timeout=adj.asyncore_loop_timeout, map=channels,
                           use_poll=adj.asyncore_use_poll, count=1)
    except (SystemExit, KeyboardInterrupt):
        return
    wasyncore.close_all(channels, ignore_all=True)


def stop(server: Any) -> None:
    """From another thread: end :func:`serve_until_interrupted` on ``server`` (it returns
    once the server's loop sees it; open connections are closed)."""
    if isinstance(server, BaseWSGIServer):
        server.shutdown()
        return
    _STOPPING.add(server)
    # Wake the loop now; without the wake it still ends within asyncore_loop_timeout (1 s),
    # so a trigger the server closed already (it closes it with itself after an error in
    # its accept) only delays the stop.
    trigger = next(s.trigger for s in [server, *list(_channels(server).values())]
                   if hasattr(s, "trigger"))
    if not getattr(trigger, "_closed", False):
        with contextlib.suppress(OSError):
            trigger.pull_trigger()


def _client(addr: Any) -> str | None:
    """The client name of a channel's peer address; None for a unix socket's."""
    return client_name(str(addr[0])) if isinstance(addr, tuple) and addr else None


def _refusal(per_client: int) -> bytes:
    body = json.dumps({"error": f"too many connections from this address (at most "
                                f"{per_client}); retry later", "kind": "unavailable"}).encode()
    return (b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n"
            b"Content-Type: application/json\r\nRetry-After: 5\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body))


def capped_channel(per_client: int, setting: str = "the per-client cap") -> type:
    """A waitress channel class that refuses a connection (503, then closed, without
    reading a byte of it) whose client holds ``per_client`` connections already on the
    server that accepts it.

    waitress caps connections in all (``connection_limit``) and closes idle ones, but has
    no cap per client: one client holding ~1,000 idle connections locked every other out
    until they timed out. Behind a proxy every connection comes from the proxy: raise the
    cap (``setting``, e.g. the gateway's ``NOVA_GATEWAY_CONNECTIONS_PER_CLIENT``) or set 0,
    and let the proxy limit each client."""
    from waitress.channel import HTTPChannel

    answer = _refusal(per_client)
    lock = threading.Lock()
    refused = {"count": 0, "logged_at": 0.0}

    class CappedChannel(HTTPChannel):
        def __init__(self, server: Any, sock: Any, addr: Any, adj: Any, map: Any = None):
            super().__init__(server, sock, addr, adj, map)  # now in active_channels
            client = _client(addr)
            if client is None:
                return
            held = sum(1 for ch in list(server.active_channels.values())
                       if _client(ch.addr) == client
                       and not (ch.close_when_flushed or ch.will_close))  # refused ones
            if held > per_client:
                self.write_soon(answer)  # sent by the main loop, which then closes it
                self.close_when_flushed = True
                _note(client)

    def _note(client: str) -> None:
        with lock:
            refused["count"] += 1
            now = time.monotonic()
            if now - refused["logged_at"] < REFUSAL_LOG_EVERY_S:
                return
            count, refused["count"], refused["logged_at"] = refused["count"], 0, now
        log.warning("refused %d connection(s) past %s=%d (the last from %s); behind a "
                    "proxy every connection comes from the proxy: raise it, or set 0 and "
                    "let the proxy limit each client", count, setting, per_client, client)

    return CappedChannel
