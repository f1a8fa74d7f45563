"""Shared fixtures: real Redis per session, a namespace per test (see redis_fixtures.py)."""

from redis_fixtures import namespace, nova, r, redis_url  # noqa: F401
