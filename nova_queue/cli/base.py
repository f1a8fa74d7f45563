"""The ``nova-queue`` group, its shared options and error handling.

Shared options map straight to the ``NOVA_*`` environment variables that
:class:`nova_queue.settings.Settings` reads. User errors print one line on stderr and
exit 1; tracebacks are for bugs only (``--debug`` shows them).
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from typing import Any

import click
import redis

from nova_queue import __version__
from nova_queue.connection import redact_url
from nova_queue.errors import NovaError
from nova_queue.settings import Settings

log = logging.getLogger("nova_queue.cli")


class Context:
    """What every command gets: settings built from flags and environment."""

    def __init__(self, settings: Settings, debug: bool):
        self.settings = settings
        self.debug = debug

    def client(self):
        """A NovaClient for the configured Redis and namespace."""
        from nova_queue.client import NovaClient

        return NovaClient.from_settings(self.settings)

    def store(self):
        """The configured result store."""
        from nova_queue.stores import open_store

        return open_store(self.settings.resolved_store_url,
                          public_endpoint=self.settings.s3_public_endpoint)


pass_ctx = click.make_pass_decorator(Context)


def fail(message: str) -> None:
    """Print one clear line on stderr and exit 1."""
    click.echo(f"error: {message}", err=True)
    sys.exit(1)


def handle_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn domain and connection errors into one line on stderr and exit code 1."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context().find_object(Context)
        try:
            return fn(*args, **kwargs)
        except NovaError as exc:
            if ctx and ctx.debug:
                raise
            fail(str(exc))
        except redis.AuthenticationError:
            fail("Redis refused the credentials in the Redis URL")
        except redis.ConnectionError as exc:
            url = redact_url(ctx.settings.redis_url) if ctx else "Redis"
            if ctx and ctx.debug:
                raise
            fail(f"cannot reach Redis at {url}: {_first_line(exc)}")
        except redis.ResponseError as exc:
            if ctx and ctx.debug:
                raise
            fail(f"Redis error: {_first_line(exc)}")
        except redis.RedisError as exc:  # timeouts, a non-Redis server answering, ...
            if ctx and ctx.debug:
                raise
            url = redact_url(ctx.settings.redis_url) if ctx else "Redis"
            fail(f"cannot talk to Redis at {url}: {_first_line(exc)}")

    return wrapper


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="nova-queue")
@click.option("--redis", "redis_url", envvar=["NOVA_REDIS_URL", "REDIS_URL"], metavar="URL",
              help="Redis URL (redis://, rediss:// for TLS; credentials in the URL). "
                   "Env NOVA_REDIS_URL, then REDIS_URL.  [default: redis://localhost:6379/0]")
@click.option("--store", "store_url", envvar="NOVA_STORE_URL", metavar="URL",
              help="Result store: file:///abs/path or s3://bucket/prefix. Env NOVA_STORE_URL. "
                   "[default: file://$NOVA_HOME/.nova/results]")
@click.option("--namespace", envvar="NOVA_NAMESPACE", metavar="NAME",
              help="Key namespace. Env NOVA_NAMESPACE.  [default: default]")
@click.option("--log-level", envvar="NOVA_LOG_LEVEL", default="INFO", show_default=True,
              type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
              help="Log level. Env NOVA_LOG_LEVEL.")
@click.option("--debug", is_flag=True, envvar="NOVA_DEBUG", help="Show tracebacks.")
@click.pass_context
def cli(ctx: click.Context, redis_url: str | None, store_url: str | None,
        namespace: str | None, log_level: str, debug: bool) -> None:
    """nova-queue: one compute pool from mixed GPUs and CPUs."""
    logging.basicConfig(level=log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        settings = Settings.from_env(redis_url=redis_url, store_url=store_url,
                                     namespace=namespace)
    except NovaError as exc:
        fail(str(exc))
    ctx.obj = Context(settings, debug)

