"""``nova-queue quarantine``: see, set and lift worker quarantines (admin).

A worker whose failed tasks succeed on other workers is quarantined by the scripts: its
claims are refused, it stays registered, and after a cool-down one probe task lets it back.
These commands show that, quarantine a worker by hand, or let one back at once.
"""

from __future__ import annotations

import click

from nova_queue.cli.base import Context, handle_errors, pass_ctx, shared_options
from nova_queue.cli.text import visible
from nova_queue.errors import InputError
from nova_queue.limits import MAX_COOLDOWN_S
from nova_queue.worker_info import WorkerInfo


@click.command()
@click.argument("action", type=click.Choice(["list", "add", "release"]))
@click.argument("worker", required=False)
@click.option("--reason", default="", help="add: shown with the worker (at most 500 characters).")
@click.option("--cooldown", "cooldown_s", type=click.FloatRange(0.001, MAX_COOLDOWN_S),
              default=None, metavar="SECONDS",
              help="add: until its probe task.  [default: NOVA_QUARANTINE_COOLDOWN_S or 300]")
@shared_options()
@pass_ctx
@handle_errors
def quarantine(ctx: Context, action: str, worker: str | None, reason: str,
               cooldown_s: float | None) -> None:
    """Quarantined workers (admin): 'list' them with why and when each probes again; 'add
    WORKER' quarantines one by hand (its claims are refused until a probe task after the
    cool-down commits); 'release WORKER' lets one claim again now. WORKER is a worker id, or
    a name if only one worker has it.
    """
    client = ctx.client()
    if action == "list":
        _list(client)
        return
    if not worker:
        raise InputError(f"quarantine {action} needs a WORKER (an id or a name)")
    w = find_worker(client.workers(), worker)
    state = client.set_quarantine(w.worker_id, action == "add", reason=reason,
                                  cooldown_s=cooldown_s)
    said = {"quarantined": "quarantined", "released": "released",
            "unchanged": "already quarantined" if action == "add" else "was not quarantined"}
    click.echo(f"{visible(w.name)} ({visible(w.worker_id)}): {said[state]}")


def _list(client) -> None:
    now_ms = client.server_time_ms()
    found = [w for w in client.workers() if w.quarantined]
    if not found:
        click.echo("no worker is quarantined")
    for w in found:
        wait = max(0, (w.quarantine_until_ms or now_ms) - now_ms) / 1000
        click.echo(f"{visible(w.name)} ({visible(w.worker_id)}) "
                   f"{'alive' if w.alive else visible(w.state)}, probe in {wait:.0f} s: "
                   f"{visible(w.quarantine_reason)}")


def find_worker(workers: list[WorkerInfo], key: str) -> WorkerInfo:
    """The worker whose id is ``key``, else the only one named ``key``."""
    for w in workers:
        if w.worker_id == key:
            return w
    named = [w for w in workers if w.name == key]
    if len(named) == 1:
        return named[0]
    if named:
        raise InputError(f"{len(named)} workers are named {visible(key)!r}; give its id "
                         f"({visible(', '.join(w.worker_id for w in named[:5]))})")
    raise InputError(f"no worker {visible(key)!r} (see 'nova-queue workers --all')")
