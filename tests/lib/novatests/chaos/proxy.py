"""A TCP proxy (in front of Redis or S3) that can lose replies: after it forwards a request
that contains a marker (a script's SHA, a PNG body), it waits for the server's answer (so
the request took effect), drops that answer and cuts the connection; then it refuses new
connections for ``down_s``. Several ``arm`` calls queue up, one cut each, in order.

Threads, not asyncio: two pump threads per connection keep the code short and the
forwarding order exact."""

from __future__ import annotations

import socket
import threading
import time

from nova_queue.local import free_port


class CutProxy:
    """``127.0.0.1:port`` -> ``127.0.0.1:target_port``; ``arm(marker)`` to lose a reply."""

    def __init__(self, target_port: int):
        self.target_port = target_port
        self.port = free_port()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._lock = threading.Lock()
        self._arms: list[tuple[bytes, float]] = []
        self._down_until = 0.0
        self._socks: list[socket.socket] = []
        self._closed = False
        #: replies dropped so far
        self.cuts = 0
        #: connections refused during down windows
        self.refused = 0
        threading.Thread(target=self._accept, daemon=True, name="proxy-accept").start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def arm(self, marker: bytes, *, down_s: float = 0.0) -> None:
        """Lose the reply of the next request containing ``marker`` (after the cuts armed
        before it); then refuse connections for ``down_s``."""
        with self._lock:
            self._arms.append((marker, down_s))

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        with self._lock:
            for s in self._socks:
                _close(s)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if time.monotonic() < self._down_until:
                self.refused += 1
                _close(client)
                continue
            try:
                server = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            except OSError:
                _close(client)
                continue
            server.settimeout(None)
            with self._lock:
                self._socks += [client, server]
            state: dict[str, float | None] = {"cut": None}
            threading.Thread(target=self._up, args=(client, server, state), daemon=True).start()
            threading.Thread(target=self._down, args=(client, server, state),
                             daemon=True).start()

    def _up(self, client: socket.socket, server: socket.socket, state: dict) -> None:
        """Client -> Redis; marks the connection when the armed marker goes through."""
        tail = b""
        while True:
            try:
                data = client.recv(65536)
            except OSError:
                data = b""
            if not data:
                _close(server)
                return
            with self._lock:
                if self._arms and state["cut"] is None and self._arms[0][0] in tail + data:
                    state["cut"] = self._arms.pop(0)[1]
            tail = data[-64:]
            try:
                server.sendall(data)
            except OSError:
                _close(client)
                return

    def _down(self, client: socket.socket, server: socket.socket, state: dict) -> None:
        """Redis -> client; drops the reply of a marked command and cuts both sides."""
        while True:
            try:
                data = server.recv(65536)
            except OSError:
                data = b""
            if not data:
                _close(client)
                return
            if state["cut"] is not None:
                with self._lock:
                    self.cuts += 1
                    self._down_until = time.monotonic() + state["cut"]
                _close(client)
                _close(server)
                return
            try:
                client.sendall(data)
            except OSError:
                _close(server)
                return


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
