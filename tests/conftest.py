"""Shared fixtures: real Redis per session and a namespace per test (redis_fixtures.py),
a real S3 server (s3_fixtures.py), the web app and live server (web_fixtures.py), and the
CLI run in-process (cli_fixtures.py)."""

from cli_fixtures import invoke  # noqa: F401
from redis_fixtures import namespace, nova, r, redis_url  # noqa: F401
from s3_fixtures import s3_server, s3_store_url  # noqa: F401
from web_fixtures import *  # noqa: F401,F403
