"""Extensions created at module level and bound with ``init_app``: flask-sock and the
nova-queue clients (a NovaClient, the live sockets' own NovaClient and a lazily opened
result store) kept in ``app.extensions["nova"]``."""

from __future__ import annotations

import threading
import time
from typing import Any

from flask import Flask, current_app
from flask_sock import Sock

from nova_queue import protocol
from nova_queue.client import NovaClient
from nova_queue.connection import connect
from nova_queue.results import Results
from nova_queue.settings import Settings
from nova_queue.stores import ResultStore, open_store

sock = Sock()
#: How often the gallery asks Redis for the namespace's protocol version (seconds).
PROTOCOL_CHECK_S = 30.0


class NovaState:
    """The shared clients of one app: one NovaClient for pages, one for the live sockets
    and one result store (those two opened on first use)."""

    def __init__(self, settings: Settings, client: NovaClient | None = None,
                 store: ResultStore | None = None):
        self.settings = settings
        self.client = client or NovaClient.from_settings(settings)
        self._store = None if store is None else Results(self.client.redis, self.client.keys,
                                                         store)
        self._live: NovaClient | None = None
        self._lock = threading.Lock()
        self._protocol_ok_at: float | None = None

    @property
    def live_client(self) -> NovaClient:
        """The live sockets' client (``web/sockets.py``): a pool of its own, of
        ``NOVA_WEB_LIVE_SOCKETS`` connections, so their blocking reads never take a page's."""
        with self._lock:
            if self._live is None:
                self._live = NovaClient(connect(self.settings.redis_url,
                                                max_connections=self.settings.web_live_sockets),
                                        settings=self.settings)
            return self._live

    @property
    def store(self) -> Results:
        """The results, in Redis (small ones) or the store (nova_queue/results.py); the
        store is opened lazily so the web app starts even while S3 is down."""
        client = self.client
        with self._lock:
            if self._store is None:
                self._store = Results(client.redis, client.keys,
                                      open_store(self.settings.resolved_store_url,
                                                 public_endpoint=self.settings.s3_public_endpoint))
            return self._store

    def check_protocol(self) -> None:
        """Raise ProtocolMismatchError if the namespace speaks another protocol version than
        this release; asks Redis at most every PROTOCOL_CHECK_S while it agrees."""
        now = time.monotonic()
        if self._protocol_ok_at is not None and now - self._protocol_ok_at < PROTOCOL_CHECK_S:
            return
        protocol.check(self.client.redis, self.client.keys)
        self._protocol_ok_at = now

    def close(self) -> None:
        """Release connections."""
        self.client.close()
        if self._live is not None:
            self._live.close()
        if self._store is not None:
            self._store.close()


class Nova:
    """The extension object; ``nova.client`` / ``nova.store`` refer to the current app's."""

    def init_app(self, app: Flask, *, client: NovaClient | None = None,
                 store: ResultStore | None = None) -> None:
        """Bind to ``app``, whose ``NOVA_SETTINGS`` config holds the Settings."""
        settings = app.config.get("NOVA_SETTINGS") or Settings.from_env()
        app.config["NOVA_SETTINGS"] = settings
        app.extensions["nova"] = NovaState(settings, client, store)

    @staticmethod
    def _state() -> NovaState:
        return current_app.extensions["nova"]

    @property
    def client(self) -> NovaClient:
        return self._state().client

    @property
    def store(self) -> ResultStore:
        return self._state().store

    @property
    def settings(self) -> Settings:
        return self._state().settings


nova = Nova()


def state_of(app: Any) -> NovaState:
    """The NovaState bound to ``app`` (outside a request, e.g. in a metrics collector)."""
    return app.extensions["nova"]
