"""``nova-queue setup-torch``: install the torch build that fits this machine (the choice
is ``nova_queue/torch_setup.py``'s)."""

from __future__ import annotations

import shlex
import subprocess
import sys

import click

from nova_queue import torch_setup
from nova_queue.cli.base import handle_errors, shared_options


@click.command("setup-torch")
@click.option("--backend", type=click.Choice(torch_setup.BACKENDS), default="auto",
              show_default=True,
              help="The build: auto picks CUDA where nvidia-smi finds an NVIDIA driver, ROCm "
                   "where rocminfo finds an AMD GPU, Metal on Apple silicon, else CPU. A CUDA "
                   "build is never installed without an NVIDIA GPU.")
@click.option("--torch-version", default=torch_setup.DEFAULT_TORCH, show_default=True,
              metavar="X.Y.Z", help="The torch release (the one the test suite runs).")
@click.option("--dry-run", is_flag=True, help="Print the commands instead of running them.")
@shared_options(local=True)
@handle_errors
def setup_torch(backend: str, torch_version: str, dry_run: bool) -> None:
    """Install the torch build that fits this machine, before 'pip install
    nova-queue[txt2img]' (whose torch requirement it then meets): PyPI's default Linux torch
    bundles CUDA, several GB a CPU machine never uses."""
    machine = torch_setup.detect()
    chosen = torch_setup.choose(machine, backend)
    commands = torch_setup.pip_commands(chosen, machine, torch_version)
    installed = torch_setup.installed_torch()
    click.echo(f"this machine: {machine.describe()}", err=True)
    if installed and torch_setup.fits(installed, chosen, machine, torch_version):
        click.echo(f"torch {installed} is installed and fits ({chosen}): nothing to do"
                   + ("; the commands that install it:" if dry_run else ""), err=True)
        if not dry_run:
            return
    else:
        if installed:  # another build of that release would satisfy pip: remove it first
            commands.insert(0, [sys.executable, "-m", "pip", "uninstall", "-y", "torch"])
        click.echo(f"the {chosen} build of torch {torch_version}"
                   + (f", replacing torch {installed}" if installed else "") + ":", err=True)
    for command in commands:
        click.echo(shlex.join(command))
        if not dry_run and subprocess.run(command, check=False).returncode != 0:
            click.echo(f"error: {command[2] if command[1] == '-m' else command[0]} failed; "
                       "nothing else was run", err=True)
            sys.exit(1)
