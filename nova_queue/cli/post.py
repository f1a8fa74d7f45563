"""``nova-queue post-worker``: builds finished jobs' artifacts (RQ, no fork per job; RQ is
the ``post`` extra)."""

from __future__ import annotations

import sys

import click

from nova_queue.cli.base import Context, fail, handle_errors, pass_ctx, shared_options

#: What installs RQ, the post-worker's queue (not a core dependency).
INSTALL_HINT = "pip install 'nova-queue[post]'"


def require_rq(what: str) -> None:
    """Exit with one line naming the ``post`` extra when RQ cannot be imported."""
    try:
        import rq  # noqa: F401
    except ImportError as exc:
        fail(f"{what} needs RQ: {INSTALL_HINT} ({exc.name or 'rq'} is missing)")


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
    NOVA_WEBHOOK_URL if set. Queue: nova-post (namespace default) or nova-post:<ns>.
    Needs the post extra (RQ)."""
    require_rq("the post-worker")
    from nova_queue.post.worker import PostWorker

    worker = PostWorker(ctx.settings, sweep_interval_s=sweep_interval_s, name=name)
    sys.exit(worker.run(burst=burst))
