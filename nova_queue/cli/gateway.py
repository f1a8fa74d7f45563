"""``nova-queue tokens`` (create, list, revoke) and ``nova-queue gateway``: workers on
machines you do not control join through the gateway with a token instead of Redis and
store credentials (``web/gateway``, ``nova_queue/tokens.py``)."""

from __future__ import annotations

import datetime
import signal

import click

from nova_queue.cli.base import Context, fail, handle_errors, pass_ctx, shared_options
from nova_queue.cli.text import safe_json, visible
from nova_queue.errors import InputError
from nova_queue.placement import parse_labels
from nova_queue.terms import parse_price

_GATEWAY_DEPENDENCIES = ("flask", "werkzeug", "flask_sock", "simple_websocket",
                         "prometheus_client")


@click.command()
@click.argument("action", type=click.Choice(["create", "list", "revoke"]))
@click.argument("name", required=False)
@click.option("--app", "apps", multiple=True, metavar="NAME",
              help="create: an app the token's worker may serve, repeatable.  [default: any]")
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE",
              help="create: a label the worker gets (and may claim to have), repeatable; it "
                   "overrides what the worker reports (e.g. --label backend=cuda).")
@click.option("--trust", type=click.Choice(["new", "trusted"]), default="new",
              show_default=True,
              help="create: 'new': the worker's results are verified (re-run elsewhere, a "
                   "share of them) until it earns trust; 'trusted': you vouch for the machine "
                   "and none is re-run (docs/SECURITY.md).")
@click.option("--owner", metavar="WHO",
              help="create: who runs the machine (1 to 128 of A-Z a-z 0-9 _ . : @ + / -): a "
                   "worker that is not trusted never verifies a result of the same owner's "
                   "workers, so give one person's tokens one owner.  [default: NAME]")
@click.option("--cost-per-hour", "cost_per_hour", default="0", show_default=True,
              metavar="DOLLARS",
              help="create: what an hour of the token's worker costs, in dollars (the "
                   "worker cannot set its own).")
@click.option("--json", "as_json", is_flag=True, help="list: one JSON array.")
@click.option("--gateway", "gateway_url", metavar="URL", envvar="NOVA_GATEWAY_URL",
              help="create: the gateway's public URL (https://HOST): the commands that join "
                   "a machine with the token are printed after it. Env NOVA_GATEWAY_URL.")
@shared_options()
@pass_ctx
@handle_errors
def tokens(ctx: Context, action: str, name: str | None, apps: tuple[str, ...],
           labels: tuple[str, ...], trust: str, owner: str | None, cost_per_hour: str,
           as_json: bool, gateway_url: str | None) -> None:
    """Gateway worker tokens: 'create NAME' makes one and prints it (only then: Redis keeps
    its SHA-256 only), with --gateway URL followed by the commands that join a machine with
    it (install the gateway's own release, the right torch, start the worker); 'list' shows
    name, apps, labels, trust, owner, price, created, last used and the worker using it; 'revoke
    NAME' refuses its next request and puts its worker's leases back in the queue now.
    """
    from nova_queue import tokens as token_store

    client = ctx.client()
    if action == "list":
        _list(token_store.list_tokens(client), as_json)
        return
    if not name:
        raise InputError(f"tokens {action} needs a NAME")
    if action == "create":
        if gateway_url and not gateway_url.startswith(("https://", "http://")):
            raise InputError(f"--gateway {gateway_url!r} must start with https:// (or http://)")
        token = token_store.create(client, name, apps=apps, labels=parse_labels(labels),
                                   trust=trust, owner=owner,
                                   cost_per_hour=parse_price(cost_per_hour))
        click.echo(token)
        click.echo(f"token {name!r} created; give it to the worker as NOVA_WORKER_TOKEN (it "
                   "is not shown again)", err=True)
        _print_join(gateway_url, token, apps, ctx.settings.gateway_ca_bundle)
        return
    worker, released = token_store.revoke(client, name)
    click.echo(f"revoked token {name!r}" + (f"; worker {visible(worker)} deregistered, "
                                            f"{released} lease(s) back in the queue"
                                            if worker else ""))


def _print_join(url: str | None, token: str, apps: tuple[str, ...], ca_bundle: str) -> None:
    """After a new token: the commands that join a machine with it, or how to get them."""
    from nova_queue.cli.join import HEADER, gateway_wheel, join_commands

    if not url:
        click.echo("add --gateway URL (the gateway's public https:// address; or set "
                   "NOVA_GATEWAY_URL) to print the commands that join a machine with it",
                   err=True)
        return
    wheel, note = gateway_wheel(url, ca_bundle)
    if note:
        click.echo(f"note: {note}", err=True)
    click.echo(f"\n{HEADER}\n")
    for line in join_commands(url, token, apps, wheel):
        click.echo(f"  {line}")


def _list(found, as_json: bool) -> None:
    if as_json:
        click.echo(safe_json([t.to_json() for t in found]))
        return
    if not found:
        click.echo("no tokens")
    for t in found:
        labels = ",".join(f"{k}={v}" for k, v in t.labels.items()) or "-"
        click.echo(f"{visible(t.name):24} apps {visible(','.join(t.apps) or 'any'):16} "
                   f"labels {visible(labels):24} trust {t.trust:7} owner {visible(t.owner):16} "
                   f"${t.cost_per_hour:g}/h created {_when(t.created_ms)} "
                   f"used {_when(t.last_used_ms)} worker {visible(t.worker or '-')}")


def _when(ms: int | None) -> str:
    if not ms:
        return "never"
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).strftime(
        "%Y-%m-%d %H:%M")


@click.command()
@click.option("--bind", envvar="NOVA_GATEWAY_BIND", default="127.0.0.1:8700",
              show_default=True, metavar="HOST:PORT",
              help="Address to listen on (port 0: any free one); put a TLS reverse proxy in "
                   "front of it. Env NOVA_GATEWAY_BIND.")
@click.option("--server", type=click.Choice(["waitress", "werkzeug"]), default=None,
              help="HTTP server [default: waitress when installed ('nova-queue[gateway]'), "
                   "else werkzeug's threaded one].")
@click.option("--threads", type=click.IntRange(1, 4096), default=64, show_default=True,
              envvar="NOVA_GATEWAY_THREADS",
              help="waitress: requests served at once; a claim's long poll holds one for up "
                   "to 10 s, so give it more than the workers joined. Env "
                   "NOVA_GATEWAY_THREADS.")
@shared_options()
@pass_ctx
@handle_errors
def gateway(ctx: Context, bind: str, server: str | None, threads: int) -> None:
    """Serve the worker protocol over HTTP for workers with a token (no Redis or store
    credentials on their machines)."""
    host, port = _host_port(bind)
    try:
        from nova_queue.web.gateway import serve
    except ImportError as exc:
        if (exc.name or "").split(".")[0] in _GATEWAY_DEPENDENCIES:
            fail(f"the gateway needs Flask: pip install 'nova-queue[gateway]' ({exc.name} is "
                 "missing)")
        raise
    from nova_queue.serving import default_server

    if server == "waitress" and default_server() != "waitress":
        fail("--server waitress needs waitress: pip install 'nova-queue[gateway]'")
    server = server or default_server()
    shown = f"[{host}]" if ":" in host else host

    def ready(bound: int) -> None:
        click.echo(f"nova-queue gateway on http://{shown}:{bound}/v1 (namespace "
                   f"{ctx.settings.namespace}, {server}); Ctrl-C to stop", err=True)

    ctx.client()  # refuse a namespace of another protocol before listening
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # docker stop: as Ctrl-C
    try:
        serve(ctx.settings, host, port, on_ready=ready, server=server, threads=threads)
    except OSError as exc:
        fail(f"cannot listen on {bind}: {exc.strerror or exc}")
    except KeyboardInterrupt:
        pass


def _host_port(bind: str) -> tuple[str, int]:
    host, sep, port = bind.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535 or not host:
        raise click.BadParameter(f"{bind!r}: expected HOST:PORT (e.g. 0.0.0.0:8700)",
                                 param_hint="--bind")
    return host.strip("[]"), int(port)
