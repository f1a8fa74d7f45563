"""``nova-queue make-model``: a random-weight SD-Turbo-family pipeline, no download needed."""

from __future__ import annotations

import time
from pathlib import Path

import click

from nova_queue.cli.base import fail, handle_errors, shared_options


@click.command("make-model")
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--full-size", is_flag=True,
              help="The real SD-Turbo (SD 2.1-base) architecture (~1.3 B parameters, ~5 GB, "
                   "minutes to build) for measuring true GPU throughput. Default: tiny.")
@click.option("--seed", type=int, default=0, show_default=True, help="Weight initialisation seed.")
@shared_options(local=True)
@handle_errors
def make_model(out_dir: Path, full_size: bool, seed: int) -> None:
    """Write a random-weight txt2img model to OUT_DIR, loadable with -p model=OUT_DIR.

    Its images are noise: it exists for tests, the offline demo and throughput
    measurements where weights cannot be downloaded.
    """
    try:
        from nova_queue.workers.apps.txt2img_model import make_model as build
    except ImportError as exc:  # pragma: no cover - the txt2img extra is missing
        fail(f"{exc}; install it with: pip install 'nova-queue[txt2img]'")
    if out_dir.exists() and any(out_dir.iterdir()):
        fail(f"{out_dir} is not empty; choose a new folder")
    started = time.perf_counter()
    try:
        folder = build(out_dir, full_size=full_size, seed=seed)
    except ImportError as exc:
        fail(f"{exc}; install it with: pip install 'nova-queue[txt2img]'")
    kind = "full-size" if full_size else "tiny"
    click.echo(f"wrote a {kind} random-weight model to {folder} in "
               f"{time.perf_counter() - started:.1f} s (its images are noise)")
    click.echo(f"use it with: nova-queue enqueue prompts.txt -p model={folder.resolve()}")
