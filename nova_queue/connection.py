"""Redis connections from URLs: auth, TLS (``rediss://``), unix sockets and Redis Cluster."""

from __future__ import annotations

import re
import urllib.parse
from typing import Any

import redis
from redis.backoff import ExponentialWithJitterBackoff
from redis.retry import Retry

from nova_queue.errors import ConfigError

#: Socket timeouts suit WAN links with > 1 s round trips; blocking reads stay below them.
SOCKET_TIMEOUT_S = 15.0
CONNECT_TIMEOUT_S = 5.0


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (safe for logs and errors)."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "<invalid url>"
    if parts.password is None and "@" not in parts.netloc:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    try:
        port = parts.port
    except ValueError:  # out of range: keep the host, drop the port
        port = None
    if port:
        host = f"{host}:{port}"
    netloc = f"{user}:***@{host}" if (user or parts.password) else host
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def connect(url: str, *, decode_responses: bool = True, **kwargs: Any) -> redis.Redis:
    """A client for ``url``; ``?cluster=true`` connects to a Redis Cluster."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError as exc:
        raise ConfigError(f"invalid Redis URL {redact_url(url)!r}: {exc}") from None
    if parts.scheme not in ("redis", "rediss", "unix"):
        raise ConfigError(
            f"invalid Redis URL {redact_url(url)!r}: use redis://, rediss:// (TLS) or unix://"
        )
    if parts.scheme != "unix" and not _DB_PATH.fullmatch(urllib.parse.unquote(parts.path)):
        # redis-py would quietly use database 0 for a path that is not a number
        raise ConfigError(f"invalid Redis URL {redact_url(url)!r}: the path must be a database "
                          f"number (/0), not {parts.path!r}")
    query = urllib.parse.parse_qs(parts.query)
    cluster = query.pop("cluster", ["false"])[-1].lower() in ("1", "true", "yes")
    # by hand: urlunsplit would turn unix:///path into unix:/path, which redis-py refuses
    rest = urllib.parse.urlencode(query, doseq=True)
    clean_url = f"{parts.scheme}://{parts.netloc}{parts.path}" + (f"?{rest}" if rest else "")
    options: dict[str, Any] = {
        "decode_responses": decode_responses,
        "socket_timeout": SOCKET_TIMEOUT_S,
        "socket_connect_timeout": CONNECT_TIMEOUT_S,
        "socket_keepalive": True,
        "health_check_interval": 30,
        "retry": Retry(ExponentialWithJitterBackoff(base=0.05, cap=2.0), 3),
        "retry_on_error": [redis.ConnectionError, redis.TimeoutError],
        **kwargs,
    }
    if parts.scheme == "unix":
        options.pop("socket_keepalive")  # a TCP option: redis-py's socket connection refuses it
    try:
        if cluster:
            options.pop("health_check_interval", None)
            options.pop("retry_on_error", None)
            return _cluster_client().from_url(clean_url, **options)  # type: ignore[return-value]
        client = redis.Redis.from_url(clean_url, **options)
    except ValueError as exc:
        raise ConfigError(f"invalid Redis URL {redact_url(url)!r}: {exc}") from None
    if query:
        _check_query_options(client, url, parts.scheme)
    return client


#: What redis-py reads as the database of a ``redis://`` or ``rediss://`` URL.
_DB_PATH = re.compile(r"/?(\d+/?)?")


def _check_query_options(client: redis.Redis, url: str, scheme: str) -> None:
    """Refuse query options the connection does not take (``?foo=1``, ``?ssl_ca_certs``
    without ``rediss://``): redis-py would raise a TypeError only at the first command.
    Building a connection object checks them against redis-py itself; it opens no socket."""
    pool = client.connection_pool
    try:
        pool.connection_class(**pool.connection_kwargs).disconnect()
    except TypeError as exc:
        client.close()
        found = re.search(r"unexpected keyword argument '([^']+)'", str(exc))
        name = found.group(1) if found else None
        what = f"unknown option {name!r} in the query" if name else str(exc)
        if name and name.startswith("ssl") and scheme != "rediss":
            what += " (TLS options need rediss://)"
        raise ConfigError(f"invalid Redis URL {redact_url(url)!r}: {what}") from None


def _cluster_client() -> type:
    """RedisCluster whose 'no node reachable' error is a redis.ConnectionError.

    redis-py raises RedisClusterException (not a RedisError) when no cluster node
    answers; callers ride out outages by catching RedisError, so translate it.
    """
    from redis.cluster import RedisCluster
    from redis.exceptions import RedisClusterException

    class ClusterClient(RedisCluster):
        def execute_command(self, *args: Any, **kwargs: Any) -> Any:
            try:
                return super().execute_command(*args, **kwargs)
            except RedisClusterException as exc:
                if "cannot be connected" not in str(exc):
                    raise  # a usage error (e.g. keys in different slots), not an outage
                raise redis.ConnectionError(str(exc)) from exc

    return ClusterClient
