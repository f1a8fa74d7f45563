"""Fixtures of several test folders: a private redis-server per session with a namespace per
test, and a real S3 server (SeaweedFS) per session with a bucket per test.

Each folder's own fixtures are in its conftest.py (``web/``: the Flask app and a live server;
``cli/``: ``invoke``; ``chaos/``: fleets, private servers, the report). Helpers that are not
fixtures are in ``tests/lib/novatests`` (on ``sys.path`` through pytest's ``pythonpath``).
"""

from __future__ import annotations

import os
import re
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from novatests.s3 import SeaweedS3, use_dummy_credentials

from nova_queue.errors import ConfigError
from nova_queue.local import RedisServer, find_redis_server

ROOT = Path(__file__).resolve().parents[1]


def _drop_checkout_root_from_sys_path() -> None:
    """``python -m pytest`` run from the checkout puts the checkout first on ``sys.path``,
    which makes the source folders ``web/`` and ``workers/`` importable as top-level
    modules. Users never have those (they are ``nova_queue.web`` and ``nova_queue.workers``),
    so tests must not either (tests/project/test_layering.py checks)."""
    sys.path[:] = [p for p in sys.path if Path(p or os.curdir).resolve() != ROOT]


_drop_checkout_root_from_sys_path()


@pytest.fixture(scope="session")
def redis_server_bin() -> str:
    """The ``redis-server`` the tests start: ``NOVA_TEST_REDIS_SERVER``, else the newest on
    PATH; stops the session when there is none."""
    try:
        return find_redis_server("NOVA_TEST_REDIS_SERVER")
    except ConfigError as exc:
        pytest.exit(str(exc), returncode=2)


@pytest.fixture(scope="session")
def redis_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """URL of the session's Redis (``NOVA_TEST_REDIS_URL`` to use an existing one)."""
    if os.environ.get("NOVA_TEST_REDIS_URL"):
        yield os.environ["NOVA_TEST_REDIS_URL"]
        return
    server = RedisServer(binary=request.getfixturevalue("redis_server_bin")).start()
    try:
        yield server.url
    finally:
        server.close()


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    """A decoded redis-py client on the session's Redis."""
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def namespace(request: pytest.FixtureRequest) -> str:
    """A namespace no other test uses."""
    base = re.sub(r"[^A-Za-z0-9_-]", "-", request.node.name)[:40]
    return f"t-{base}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def nova(redis_url: str, namespace: str):
    """A NovaClient on the session's Redis, in this test's namespace."""
    from nova_queue import NovaClient

    client = NovaClient.from_url(redis_url, namespace=namespace)
    yield client
    client.close()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[SeaweedS3]:
    """The session's SeaweedFS S3 server; AWS_* env vars hold its dummy credentials."""
    with pytest.MonkeyPatch.context() as mp:
        use_dummy_credentials(mp)
        server = SeaweedS3().start()
        try:
            yield server
        finally:
            server.close()


@pytest.fixture
def s3_store_url(s3_server: SeaweedS3, request: pytest.FixtureRequest) -> str:
    """An ``s3://`` store URL on a bucket no other test uses (the store creates it)."""
    base = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40]
    bucket = f"t-{base}-{uuid.uuid4().hex[:10]}".replace("--", "-")
    return f"s3://{bucket}/results?endpoint={s3_server.endpoint}"
