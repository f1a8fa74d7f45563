"""A local webhook receiver for post-processing tests."""

from __future__ import annotations

import http.server
import json
import threading


class Webhook:
    """A local HTTP server that records POSTs and answers the given statuses in turn."""

    def __init__(self, statuses: list[int]):
        self.statuses = list(statuses)
        self.received: list[dict] = []
        hook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                hook.received.append(json.loads(body))
                status = hook.statuses.pop(0) if hook.statuses else 200
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hooks/nova?token=abc"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
