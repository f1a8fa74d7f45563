"""``nova-queue demo``: the one-machine start."""

from __future__ import annotations

import signal
import sys
import webbrowser
from pathlib import Path

import click

from nova_queue.cli.base import fail, handle_errors, shared_options


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@click.command()
@click.option("--workers", type=click.IntRange(1, 16), default=3, show_default=True,
              help="Local workers, each with a different simulated speed.")
@click.option("--prompts", type=click.IntRange(1, 64), default=64, show_default=True,
              help="How many of the 64 bundled prompts to enqueue.")
@click.option("--data", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Keep Redis data, results and logs here [default: a temporary folder, "
                   "removed on exit].")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True,
              help="Gallery port (a free one if busy).")
@click.option("--no-browser", is_flag=True, help="Do not open the gallery in a browser.")
@click.option("--kill-one", is_flag=True, help="kill -9 a busy worker mid-job to show failover.")
@click.option("--app", type=click.Choice(["synthetic", "txt2img"]), default="synthetic",
              show_default=True, help="synthetic runs anywhere in seconds; txt2img needs --model.")
@click.option("--model", default=None, metavar="DIR",
              help="txt2img model folder (e.g. from nova-queue make-model DIR).")
@click.option("--exit-when-done", is_flag=True,
              help="Exit (0 on success) when the job is complete, stopping everything.")
@shared_options(local=True)
@handle_errors
def demo(workers: int, prompts: int, data: Path | None, port: int, no_browser: bool,
         kill_one: bool, app: str, model: str | None, exit_when_done: bool) -> None:
    """Run a whole pool on this machine: Redis, gallery, workers, and a job of prompts."""
    from nova_queue.cli.demo_pool import Demo, DemoOptions
    from nova_queue.cli.post import require_rq

    require_rq("the demo's post-worker")  # before anything starts
    if app == "txt2img" and not model:
        fail("--app txt2img needs --model DIR (nova-queue make-model DIR writes a tiny one)")
    if model and not Path(model).is_dir():
        fail(f"--model {model}: no such folder")
    run = Demo(DemoOptions(workers=workers, prompts=prompts, data=data, port=port,
                           open_browser=not no_browser, kill_one=kill_one, app=app,
                           model=str(Path(model).resolve()) if model else None,
                           exit_when_done=exit_when_done), echo=click.echo)
    signal.signal(signal.SIGTERM, _interrupt)  # SIGTERM ends the demo like Ctrl+C does
    ok = False
    try:
        click.echo(f"starting Redis, the gallery and {workers} worker(s) in {run.data} ...")
        run.start()
        job = run.enqueue()
        click.echo(f"enqueued {prompts} prompts as job {job}")
        click.echo(f"gallery: {run.gallery_url()}")
        click.echo(f"submit token for the gallery form: {run.token}")
        if not no_browser:
            webbrowser.open(run.gallery_url())
        ok = run.follow()
    except KeyboardInterrupt:
        click.echo("stopping ...")
        ok = True
    finally:
        run.stop()
        click.echo("stopped everything the demo started")
    sys.exit(0 if ok else 1)
