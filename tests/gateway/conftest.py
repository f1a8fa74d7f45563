"""Fixtures of the gateway tests: settings, a file store, the gateway app and its test
client, tokens, and a gateway served in this process (helpers for real processes are in
``novatests.gateway``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from novatests.serving import served

from nova_queue import Settings, tokens
from nova_queue.client import NovaClient
from nova_queue.serving import werkzeug_server
from nova_queue.web.gateway import create_app


@pytest.fixture
def gw_settings(redis_url: str, namespace: str, tmp_path: Path) -> Settings:
    """The gateway's settings: the test's namespace, a file store, short leases; every
    result goes to the store (the tests send tiny ones and check the store's writes and
    clean-ups; results held in Redis: test_gateway_inline.py)."""
    return Settings(redis_url=redis_url, namespace=namespace,
                    store_url=(tmp_path / "store").as_uri(), lease_ttl_s=4.0,
                    heartbeat_interval_s=0.5, gateway_rate_per_min=10_000,
                    inline_result_bytes=0)


@pytest.fixture
def admin(gw_settings: Settings) -> Iterator[NovaClient]:
    """A NovaClient in the gateway's namespace (the pool owner's side)."""
    client = NovaClient.from_settings(gw_settings)
    yield client
    client.close()


@pytest.fixture
def gw_app(gw_settings: Settings):
    """The gateway app (testing mode)."""
    app = create_app({"TESTING": True}, settings=gw_settings)
    yield app
    app.extensions["nova_gateway"].close()


@pytest.fixture
def gw(gw_app):
    """The gateway app's test client."""
    return gw_app.test_client()


@pytest.fixture
def make_token(admin: NovaClient):
    """``make_token(name, apps=(), labels=None, trust="trusted", owner=None)``: create a token, return
    it. Trusted by default: these tests are about the gateway's calls, and a new token's
    results would wait for a verifier (tests/gateway/test_gateway_verify.py has those)."""

    def make(name: str = "w1", apps=(), labels=None, trust: str = "trusted",
             owner: str | None = None) -> str:
        return tokens.create(admin, name, apps=apps, labels=labels, trust=trust, owner=owner)

    return make


@pytest.fixture
def live_gateway(gw_app) -> Iterator[str]:
    """The gateway served on a free port in a thread of this process; its URL."""
    with served(werkzeug_server(gw_app)) as port:
        yield f"http://127.0.0.1:{port}"
