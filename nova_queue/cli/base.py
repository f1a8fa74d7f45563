"""The ``nova-queue`` group, its shared options and error handling.

Shared options map straight to the ``NOVA_*`` environment variables that
:class:`nova_queue.settings.Settings` reads. User errors print one line on stderr and
exit 1; tracebacks are for bugs only (``--debug`` shows them).
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable, Iterable
from typing import Any

import click
import redis
from click.core import ParameterSource

from nova_queue import __version__
from nova_queue.cli.text import visible
from nova_queue.connection import redact_url
from nova_queue.errors import NovaError
from nova_queue.settings import Settings

log = logging.getLogger("nova_queue.cli")


class Context:
    """What every command gets: settings built from flags and environment."""

    def __init__(self, settings: Settings, debug: bool):
        self.settings = settings
        self.debug = debug

    def client(self, *, check_protocol: bool = True):
        """A NovaClient for the configured Redis and namespace; unless told otherwise it
        refuses a namespace of another protocol version (ProtocolMismatchError)."""
        from nova_queue import protocol
        from nova_queue.client import NovaClient

        client = NovaClient.from_settings(self.settings)
        if check_protocol:
            protocol.check(client.redis, client.keys)
        return client

    def store(self):
        """The configured result store."""
        from nova_queue.stores import open_store

        return open_store(self.settings.resolved_store_url,
                          public_endpoint=self.settings.s3_public_endpoint)


pass_ctx = click.make_pass_decorator(Context)


def fail(message: str) -> None:
    """Print one clear line on stderr and exit 1 (control characters shown, not obeyed)."""
    click.echo(f"error: {visible(message)}", err=True)
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


#: The options every command shares: name -> (option declarations, click keyword arguments).
#: One definition, applied to the group and to each command, listed in this order.
_SHARED: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "redis_url": (("--redis", "redis_url"), {
        "envvar": ["NOVA_REDIS_URL", "REDIS_URL"], "metavar": "URL",
        "help": "Redis URL (redis://, rediss:// for TLS; credentials in the URL). "
                "Env NOVA_REDIS_URL, then REDIS_URL.  [default: redis://localhost:6379/0]"}),
    "store_url": (("--store", "store_url"), {
        "envvar": "NOVA_STORE_URL", "metavar": "URL",
        "help": "Result store: file:///abs/path or s3://bucket/prefix. Env NOVA_STORE_URL. "
                "[default: file://$NOVA_HOME/.nova/results]"}),
    "namespace": (("--namespace",), {
        "envvar": "NOVA_NAMESPACE", "metavar": "NAME",
        "help": "Key namespace. Env NOVA_NAMESPACE.  [default: default]"}),
    "log_level": (("--log-level",), {
        "envvar": "NOVA_LOG_LEVEL", "default": "INFO", "show_default": True,
        "type": click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
        "help": "Log level (logs go to stderr). Env NOVA_LOG_LEVEL."}),
    "debug": (("--debug",), {"is_flag": True, "envvar": "NOVA_DEBUG",
                             "help": "Show tracebacks. Env NOVA_DEBUG."}),
}
#: What commands that run only locally (no Redis, no store) take: the logging options.
_LOCAL = ("log_level", "debug")


def _apply_shared(fn: Callable[..., Any], names: Iterable[str] = tuple(_SHARED)
                  ) -> Callable[..., Any]:
    """``fn`` with the shared options ``names`` attached as click options."""
    for name in reversed([n for n in _SHARED if n in set(names)]):
        decls, kwargs = _SHARED[name]
        fn = click.option(*decls, **kwargs)(fn)
    return fn


def _merged(ctx: click.Context, values: dict[str, Any]) -> dict[str, Any]:
    """Shared option values: given after the command > given before it > env > default."""
    parent = ctx.parent
    out = dict(values)
    for name in values:
        if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE or parent is None:
            continue
        if parent.get_parameter_source(name) is ParameterSource.COMMANDLINE:
            out[name] = parent.params[name]
    return out


def shared_options(*, local: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command the shared options (after the command name, as well as before it).

    The wrapped command gets a :class:`Context` as ``click`` object (``pass_ctx``) built
    from the merged values; ``local`` commands (no Redis) take only the logging options.
    """
    names = _LOCAL if local else tuple(_SHARED)

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            ctx = click.get_current_context()
            if local:
                _refuse_unused(ctx)
            own = {name: kwargs.pop(name) for name in names}
            parent = ctx.parent.params if ctx.parent else {}
            values = {**{n: parent.get(n) for n in _SHARED}, **_merged(ctx, own)}
            ctx.obj = _make_context(values)
            return fn(*args, **kwargs)

        return _apply_shared(wrapper, names)

    return decorate


def _refuse_unused(ctx: click.Context) -> None:
    """A local command given ``--redis``, ``--store`` or ``--namespace`` before its name:
    say that it does not use them rather than ignore them (after the name, click already
    refuses them as unknown options)."""
    parent = ctx.parent
    for name in _SHARED:
        if name in _LOCAL or parent is None:
            continue
        if parent.get_parameter_source(name) is ParameterSource.COMMANDLINE:
            raise click.UsageError(
                f"{_SHARED[name][0][0]} does not apply to '{ctx.command_path}': it uses no "
                "shared Redis, store or namespace", ctx)


#: Libraries whose DEBUG lines describe their own internals (Pillow: every PNG chunk it reads,
#: for each result a worker checks) and would bury nova-queue's under --log-level debug.
QUIET_LIBRARIES = ("PIL",)


def _make_context(values: dict[str, Any]) -> Context:
    logging.basicConfig(level=str(values["log_level"] or "INFO").upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for name in QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(max(logging.INFO, logging.getLogger().level))
    try:
        settings = Settings.from_env(redis_url=values["redis_url"],
                                     store_url=values["store_url"],
                                     namespace=values["namespace"])
    except NovaError as exc:
        fail(str(exc))
    return Context(settings, bool(values["debug"]))


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="nova-queue")
@_apply_shared
def cli(**_shared: Any) -> None:
    """nova-queue: one compute pool from mixed GPUs and CPUs.

    The options below work before or after the command name (after wins); demo,
    make-model and setup-torch take only --log-level and --debug.
    """
