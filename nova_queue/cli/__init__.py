"""The ``nova-queue`` command: a thin click shim over the library.

Shared options (``base.py``) map straight to the ``NOVA_*`` environment variables that
:class:`nova_queue.settings.Settings` reads; one module per concern adds its commands.
Optional layers (the web app, torch) are imported inside the commands that need them,
so ``nova-queue --help`` works with only the core installed.
"""

from __future__ import annotations

from nova_queue.cli.base import cli
from nova_queue.cli.jobs import cancel, enqueue, results, status, workers
from nova_queue.cli.model import make_model
from nova_queue.cli.run import worker

for _command in (enqueue, status, workers, results, cancel, worker, make_model):
    cli.add_command(_command)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="nova-queue")


__all__ = ["cli", "main"]
