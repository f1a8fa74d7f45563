"""Connections per client on waitress: waitress caps connections in all
(``connection_limit``) and closes idle ones (``channel_timeout``), but has no cap per
client, so one client holding ~1,000 idle connections used to lock every worker out until
they timed out. :func:`capped_channel` is a waitress channel that counts the connections
of its client (:func:`nova_queue.clientaddr.client_name`: an address, an IPv6 one by its
/64) when it is accepted and, past the cap, answers 503 and closes without reading a
byte. Behind a proxy every connection comes from the proxy: raise the cap
(``NOVA_GATEWAY_CONNECTIONS_PER_CLIENT``) or set 0, and let the proxy limit each client.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

from waitress.channel import HTTPChannel

from nova_queue.clientaddr import client_name

log = logging.getLogger(__name__)

#: A refusal is logged at most this often (with the count since the last one).
LOG_EVERY_S = 60.0


def _client(addr: Any) -> str | None:
    """The client name of a channel's peer address; None for a unix socket's."""
    return client_name(str(addr[0])) if isinstance(addr, tuple) and addr else None


def _refusal(per_client: int) -> bytes:
    body = json.dumps({"error": f"too many connections from this address (at most "
                                f"{per_client}); retry later", "kind": "unavailable"}).encode()
    return (b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n"
            b"Content-Type: application/json\r\nRetry-After: 5\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body))


def capped_channel(per_client: int) -> type[HTTPChannel]:
    """A waitress channel class that refuses a connection (503, then closed) whose client
    holds ``per_client`` connections already on the server that accepts it."""
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
            if now - refused["logged_at"] < LOG_EVERY_S:
                return
            count, refused["count"], refused["logged_at"] = refused["count"], 0, now
        log.warning("refused %d connection(s) past NOVA_GATEWAY_CONNECTIONS_PER_CLIENT=%d "
                    "(the last from %s); behind a proxy every connection comes from the "
                    "proxy: raise it, or set 0 and let the proxy limit each client",
                    count, per_client, client)

    return CappedChannel
