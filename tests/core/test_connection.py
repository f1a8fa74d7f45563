"""Redis URLs: a mistake is a ConfigError naming it (password hidden) when the client is
made, never a TypeError at the first command or a silent fall-back to database 0."""

from __future__ import annotations

import pytest

from nova_queue.connection import connect, redact_url
from nova_queue.errors import ConfigError


@pytest.mark.parametrize("url, says", [
    ("http://u:pw@127.0.0.1:6379/0", "use redis://, rediss:// (TLS) or unix://"),
    ("redis://:pw@127.0.0.1:notaport/0", "Port could not be cast to integer"),
    ("redis://:pw@127.0.0.1:6379/abc", "the path must be a database number (/0), not '/abc'"),
    ("redis://:pw@127.0.0.1:6379/0/extra", "not '/0/extra'"),
    ("redis://:pw@127.0.0.1:6379/0?foo=bar", "unknown option 'foo' in the query"),
    ("redis://:pw@127.0.0.1:6379/0?ssl_ca_certs=/ca.pem",
     "unknown option 'ssl_ca_certs' in the query (TLS options need rediss://)"),
    ("rediss://:pw@127.0.0.1:6379/0?ssl_ca_certs=/ca.pem&nope=1", "unknown option 'nope'"),
    ("unix:///tmp/redis.sock?db=1&foo=2", "unknown option 'foo'"),
    ("redis://:pw@127.0.0.1:6379/0?db=abc", "Invalid value for 'db'"),
])
def test_invalid_urls_are_refused_when_the_client_is_made(url, says):
    with pytest.raises(ConfigError) as info:
        connect(url)
    message = str(info.value)
    assert message.startswith(f"invalid Redis URL {redact_url(url)!r}: ")
    assert says in message
    assert "pw" not in message.replace(redact_url(url), "")


@pytest.mark.parametrize("url, db", [
    ("redis://127.0.0.1:6379", 0), ("redis://127.0.0.1:6379/", 0),
    ("redis://127.0.0.1:6379/3", 3), ("redis://127.0.0.1:6379/3/", 3),
    ("rediss://:pw@127.0.0.1:6379/2?ssl_ca_certs=/ca.pem&ssl_cert_reqs=required", 2),
    ("redis://127.0.0.1:6379/0?socket_timeout=3&db=5", 5),
    ("unix:///tmp/redis.sock?db=4", 4),
])
def test_valid_urls_make_a_client_without_connecting(url, db):
    client = connect(url)  # nothing listens at these addresses: no socket is opened
    try:
        assert client.connection_pool.connection_kwargs.get("db", 0) == db
    finally:
        client.close()


def test_a_real_url_with_options_works(redis_url):
    client = connect(f"{redis_url.rstrip('/')}?socket_timeout=5")
    try:
        assert client.ping() is True
    finally:
        client.close()


def test_a_unix_socket_url_reaches_redis(redis_server_bin, tmp_path):
    """``unix:///path`` (with and without ``?db=``) connects: the URL is passed on intact."""
    from nova_queue.local import RedisServer

    sock = tmp_path / "redis.sock"
    server = RedisServer("--unixsocket", str(sock), "--unixsocketperm", "700",
                         binary=redis_server_bin).start()
    try:
        for url, db in ((f"unix://{sock}", 0), (f"unix://{sock}?db=3", 3)):
            client = connect(url)
            try:
                assert client.ping() is True
                assert client.connection_pool.connection_kwargs.get("db", 0) == db
                client.set("where", url)
            finally:
                client.close()
        # over TCP, database 0 holds the first URL's write: the ?db=3 one went to database 3
        assert server.client().get("where") == f"unix://{sock}"
    finally:
        server.close()
