"""A server of ``nova_queue.serving`` (werkzeug's or waitress) run in a thread of the test
process, stopped and closed at the end."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from nova_queue import serving


@contextmanager
def served(server: Any, close: Callable[[], None] = lambda: None) -> Iterator[int]:
    """Serve ``server`` (bound, not yet serving) in a thread; yields its port. Afterwards
    the server is stopped and closed, and ``close`` called, as ``serve_until_interrupted``
    does after Ctrl-C."""
    thread = threading.Thread(target=serving.serve_until_interrupted,
                              args=(server, None, close), daemon=True)
    thread.start()
    try:
        yield serving.bound_port(server)
    finally:
        serving.stop(server)
        thread.join(10)
        assert not thread.is_alive(), "the server did not stop"


def first_bytes(sock: socket.socket) -> bytes | None:
    """What the server sent first on the non-blocking ``sock``: its bytes, b"" once it closed
    it without any, None while it holds it open and sends nothing."""
    try:
        return sock.recv(4096)
    except BlockingIOError:
        return None
    except ConnectionResetError:
        return b""
