"""``nova-queue post-worker``: builds finished jobs' artifacts (RQ, no fork per job)."""

from __future__ import annotations

import sys

import click

from nova_queue.cli.base import Context, handle_errors, pass_ctx, shared_options


@click.command("post-worker")
@click.option("--burst", is_flag=True,
              help="Dispatch the outbox, work until the queue is empty (scheduled webhook "
                   "retries included), then exit.")
@click.option("--sweep-interval-s", type=click.FloatRange(min=0.1), default=5.0,
              show_default=True,
              help="Seconds between sweeps of the finished-jobs outbox (jobs are dispatched "
                   "as they finish, from the event stream; the sweep catches the rest and "
                   "queues due retries).")
@click.option("--name", default=None, help="RQ worker name [default: random].")
@shared_options()
@pass_ctx
@handle_errors
def post_worker(ctx: Context, burst: bool, sweep_interval_s: float, name: str | None) -> None:
    """Build manifest.json, contact-sheet.png and a zip for every finished job, and POST
    NOVA_WEBHOOK_URL if set. Queue: nova-post (namespace default) or nova-post:<ns>."""
    from nova_queue.post.worker import PostWorker

    worker = PostWorker(ctx.settings, sweep_interval_s=sweep_interval_s, name=name)
    sys.exit(worker.run(burst=burst))
