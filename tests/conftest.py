"""Shared fixtures: real Redis per session, a namespace per test (see redis_fixtures.py)."""

from redis_fixtures import namespace, nova, r, redis_url  # noqa: F401
from s3_fixtures import s3_server, s3_store_url  # noqa: F401
