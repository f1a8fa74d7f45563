"""``nova-queue owners``: fair share between the people (owners) who use the pool."""

from __future__ import annotations

import json

import click

from nova_queue import shares
from nova_queue.cli.base import Context, handle_errors, pass_ctx, shared_options
from nova_queue.cli.text import visible
from nova_queue.errors import InputError


@click.command()
@click.argument("action", type=click.Choice(["list", "set", "half-life"]), default="list")
@click.argument("value", required=False)
@click.option("--share", type=click.FloatRange(0.001, shares.MAX_SHARE), default=None,
              help="set: the owner's share (a weight; every owner has 1 unless set).")
@click.option("--json", "as_json", is_flag=True, help="list: print the owners as JSON.")
@shared_options()
@pass_ctx
@handle_errors
def owners(ctx: Context, action: str, value: str | None, share: float | None,
           as_json: bool) -> None:
    """Owners and their fair share of the pool: 'list' (usage, share and what each has
    queued; least usage per share first: served first), 'set OWNER --share W' (admin; no
    --share: back to 1), 'half-life SECONDS' (how fast usage is forgotten; 3600)."""
    client = ctx.client()
    if action == "set":
        if not value:
            raise InputError("owners set needs an OWNER")
        shares.set_share(client, value, share)
        click.echo(f"{visible(value)}: share {share if share is not None else 1:g}")
        return
    if action == "half-life":
        try:
            seconds = float(value or "")
        except ValueError:
            raise InputError("owners half-life needs a number of seconds") from None
        shares.set_half_life(client, seconds)
        click.echo(f"usage halves every {seconds:g} s")
        return
    found = shares.owners(client)
    if as_json:
        click.echo(json.dumps([o.to_json() for o in found]))
        return
    if not found:
        click.echo("no owners yet")
    total = sum(o.share for o in found if o.queued_apps) or 1.0
    for o in found:
        entitled = f"{100 * o.share / total:.0f} % now" if o.queued_apps else "idle"
        click.echo(f"{visible(o.owner):24} share {o.share:<6g} usage {o.usage_s:10.1f} s  "
                   f"{entitled:9} queued: {visible(', '.join(o.queued_apps)) or '-'}")
    click.echo(f"(usage halves every {shares.half_life_s(client):g} s)")
