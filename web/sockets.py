"""Who may hold a live WebSocket, and how many. A socket holds a server thread for as long
as it lives and, in its blocking read of the event stream (``XREAD BLOCK``), a Redis
connection; ~150 anonymous sockets used to take every connection of the app's pool, and
every page answered 503. So:

- With ``NOVA_WEB_TOKEN`` set, only an unlocked session opens a socket (403 otherwise); the
  pages of a locked session poll ``/api/live/...`` instead, without trying one.
- One process holds at most ``NOVA_WEB_LIVE_SOCKETS`` sockets, at most :data:`PER_CLIENT`
  from one client address (``auth.client_address``: the proxy's client with
  ``NOVA_WEB_PROXY_HOPS``, an IPv6 one by its /64); past either the handshake is a 503
  that says so, with ``Retry-After``, and the page polls.
- Sockets read through a client of their own (``NovaState.live_client``), whose pool holds
  ``NOVA_WEB_LIVE_SOCKETS`` connections: pages keep the app's pool, so sockets cannot
  starve them.

Counts are per process (under gunicorn, per worker process).
"""

from __future__ import annotations

import logging
import threading
import time

from flask import Flask, Response, current_app, g

from nova_queue.web.auth import client_address, is_unlocked, write_enabled

log = logging.getLogger(__name__)

#: Live sockets one client address may hold at once (tabs of one browser, or one NAT).
PER_CLIENT = 8
#: Refusals are logged at most this often, with their count.
LOG_EVERY_S = 60.0
#: What a refused handshake tells the client to wait.
RETRY_AFTER_S = 30


class SocketSlots:
    """Counts of the live sockets held, in all and per client; thread-safe."""

    def __init__(self, total: int, per_client: int = PER_CLIENT):
        self.total, self.per_client = total, per_client
        self._lock = threading.Lock()
        self._held: dict[str, int] = {}
        self._refused, self._logged_at = 0, 0.0

    @property
    def held(self) -> int:
        with self._lock:
            return sum(self._held.values())

    def take(self, client: str) -> str | None:
        """Hold a socket for ``client``; None, or why not."""
        with self._lock:
            if sum(self._held.values()) >= self.total:
                why = f"this gallery holds its {self.total} live connections already"
            elif self._held.get(client, 0) >= self.per_client:
                why = f"{self.per_client} live connections from your address already"
            else:
                self._held[client] = self._held.get(client, 0) + 1
                return None
            self._refused += 1
            now = time.monotonic()
            refused, log_now = self._refused, now - self._logged_at >= LOG_EVERY_S
            if log_now:
                self._refused, self._logged_at = 0, now
        if log_now:
            log.warning("refused %d live socket(s) (the last from %s: %s; NOVA_WEB_LIVE_SOCKETS"
                        "=%d, %d per client)", refused, client, why, self.total,
                        self.per_client)
        return why

    def give(self, client: str) -> None:
        """Release a socket of ``client``."""
        with self._lock:
            left = self._held.get(client, 0) - 1
            if left > 0:
                self._held[client] = left
            else:
                self._held.pop(client, None)


def slots() -> SocketSlots:
    """The current app's counts."""
    return current_app.extensions["nova_sockets"]


def sockets_allowed() -> bool:
    """Whether this session may open live sockets (pages tell their script so)."""
    return not write_enabled() or is_unlocked()


def admit() -> Response | None:
    """For a WebSocket handshake (after its Origin check): the refusal to answer instead
    (403 without the session, 503 past a cap), or None with a slot held until the request
    ends (:func:`release`)."""
    if not sockets_allowed():
        return _refusal(403, "live updates over a WebSocket need an unlocked session (the "
                             "web token) on this gallery; the page polls instead")
    client = client_address()
    why = slots().take(client)
    if why is not None:
        return _refusal(503, f"too many live connections: {why}; the page polls instead",
                        {"Retry-After": str(RETRY_AFTER_S)})
    g.nova_socket_client = client
    return None


def release(_exc: BaseException | None = None) -> None:
    """teardown_request: give back the request's socket slot, if it holds one."""
    client = g.pop("nova_socket_client", None)
    if client is not None:
        slots().give(client)


def _refusal(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return Response(f"{status}: {message}\n", status, headers, mimetype="text/plain")


def init_app(app: Flask) -> None:
    """The app's socket counts, their release at the end of each request, and the
    ``sockets_allowed`` template global."""
    settings = app.config["NOVA_SETTINGS"]
    app.extensions["nova_sockets"] = SocketSlots(settings.web_live_sockets)
    app.teardown_request(release)
    app.jinja_env.globals.update(sockets_allowed=sockets_allowed)
