"""The ``nova-queue`` command: a thin click shim over the library.

Shared options (``base.py``) map straight to the ``NOVA_*`` environment variables that
:class:`nova_queue.settings.Settings` reads and work before or after the command name;
one module per concern adds its commands.
Optional layers (the web app, torch) are imported inside the commands that need them,
so ``nova-queue --help`` works with only the core installed.
"""

from __future__ import annotations

import sys

import click

from nova_queue.cli.base import cli
from nova_queue.cli.demo import demo
from nova_queue.cli.gateway import gateway, tokens
from nova_queue.cli.jobs import cancel, enqueue, load_scripts, status, workers
from nova_queue.cli.model import make_model
from nova_queue.cli.ops import doctor, purge
from nova_queue.cli.owners import owners
from nova_queue.cli.plan import plan
from nova_queue.cli.post import post_worker
from nova_queue.cli.quarantine import quarantine
from nova_queue.cli.results import results
from nova_queue.cli.run import worker
from nova_queue.cli.setup_torch import setup_torch
from nova_queue.cli.web import web

for _command in (enqueue, status, workers, results, cancel, worker, web, post_worker, demo,
                 make_model, load_scripts, quarantine, purge, doctor, owners, gateway, tokens,
                 setup_torch, plan):
    cli.add_command(_command)


def main() -> None:
    """Console-script entry point: user errors, usage errors included, are one line + exit 1."""
    try:
        code = cli.main(prog_name="nova-queue", standalone_mode=False)
    except click.UsageError as exc:
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx else ""
        click.echo(f"error: {exc.format_message()}{hint}", err=True)
        sys.exit(1)
    except click.ClickException as exc:
        click.echo(f"error: {exc.format_message()}", err=True)
        sys.exit(1)
    except click.Abort:
        click.echo("aborted", err=True)
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)


__all__ = ["cli", "main"]
