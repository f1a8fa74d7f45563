"""``nova-queue worker``: the same command on every machine."""

from __future__ import annotations

import dataclasses
import os
import sys

import click

from nova_queue.cli.base import Context, handle_errors, pass_ctx, shared_options
from nova_queue.cli.options import parse_pairs
from nova_queue.errors import InputError
from nova_queue.placement import parse_labels
from nova_queue.terms import parse_price


# long: one decorator per option of the command (its body is 24 lines)
@click.command()
@click.option("--app", "apps", multiple=True, metavar="NAME", envvar="NOVA_APPS",
              help="App to serve, repeatable.  [default: synthetic and txt2img when torch "
                   "and diffusers are installed]")
@click.option("--backend", default="auto", show_default=True, envvar="NOVA_BACKEND",
              help="auto, cuda, rocm, mps or cpu (cuda:N / rocm:N pick a device).")
@click.option("--name", default=None, envvar="NOVA_WORKER_NAME",
              help="Display name for this run [default: the node's name in .nova/node.json].")
@click.option("--slowdown", type=click.FloatRange(min=1.0), default=1.0, show_default=True,
              envvar="NOVA_SLOWDOWN",
              help="Simulate hardware F times slower (demos and benchmarks only).")
@click.option("--cost-per-hour", "cost_per_hour", default="0", show_default=True,
              metavar="DOLLARS", envvar="NOVA_COST_PER_HOUR",
              help="What an hour of this worker costs, in dollars: jobs with a deadline or "
                   "a budget prefer cheaper workers. Env NOVA_COST_PER_HOUR.")
@click.option("--burst", is_flag=True, help="Exit when no work remains for its apps.")
@click.option("--max-tasks", type=click.IntRange(min=1), default=None,
              help="Exit after committing N tasks.")
@click.option("-o", "--option", "app_options", multiple=True, metavar="KEY=VALUE",
              help="App option, repeatable (e.g. -o model=/models/sd-turbo -o compile=1).")
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE", envvar="NOVA_LABELS",
              help="Custom label, repeatable (e.g. --label gpu=4090 --label site=lab); jobs "
                   "may require labels (enqueue --require). Env NOVA_LABELS (comma-separated). "
                   "Automatic: backend, device, memory_gb, host, fp16, nova, app.<name>.")
@click.option("--concurrency", type=click.IntRange(min=1, max=64), default=1, show_default=True,
              envvar="NOVA_CONCURRENCY",
              help="Run up to N tasks at once in this process, for apps that declare it "
                   "safe (synthetic; txt2img keeps 1). Env NOVA_CONCURRENCY.")
@click.option("--no-benchmark", is_flag=True,
              help="Skip the startup benchmark (the worker explores instead).")
@click.option("--gateway", "gateway_url", metavar="URL", envvar="NOVA_GATEWAY_URL",
              help="Join through a gateway (https://HOST) with --token instead of Redis "
                   "and store credentials (--redis and --store are then not used). "
                   "Env NOVA_GATEWAY_URL.")
@click.option("--token", "worker_token", metavar="TOKEN", envvar="NOVA_WORKER_TOKEN",
              help="The worker's gateway token ('nova-queue tokens create'); prefer the env "
                   "var NOVA_WORKER_TOKEN (a flag shows in the process list).")
@click.option("--ca-bundle", "gateway_ca_bundle", metavar="PEM", envvar="NOVA_GATEWAY_CA_BUNDLE",
              help="CA bundle for the gateway's TLS certificate. Env NOVA_GATEWAY_CA_BUNDLE.")
@shared_options()
@pass_ctx
@handle_errors
def worker(ctx: Context, apps: tuple[str, ...], backend: str, name: str | None, slowdown: float,
           cost_per_hour: str, burst: bool, max_tasks: int | None, app_options: tuple[str, ...],
           labels: tuple[str, ...], concurrency: int, no_benchmark: bool,
           gateway_url: str | None, worker_token: str | None,
           gateway_ca_bundle: str | None) -> None:
    """Detect and prove the backend, benchmark, then claim and run tasks until stopped."""
    # torch reads this when first imported: CPU fallback for ops MPS lacks (Apple Metal)
    os.environ.setdefault("PYTORCH_ENABLE_MPS_FALLBACK", "1")
    from nova_queue.workers.record import AUTOMATIC, check_custom_labels
    from nova_queue.workers.runtime import Worker, WorkerOptions

    price = parse_price(cost_per_hour)
    apps = tuple(apps) or default_apps()
    custom = parse_labels(labels)
    check_custom_labels(custom, len(AUTOMATIC) + len(apps))  # before any start-up work
    options = WorkerOptions(
        apps=apps, backend=backend, name=name, slowdown=slowdown,
        burst=burst, max_tasks=max_tasks, app_options=parse_pairs(app_options, "-o"),
        labels=custom, benchmark=not no_benchmark, concurrency=concurrency,
        cost_per_hour=price)
    w = Worker(_with_gateway(ctx.settings, gateway_url, worker_token, gateway_ca_bundle),
               options)
    w.install_signal_handlers()
    sys.exit(w.run())


def _with_gateway(settings, url: str | None, token: str | None, ca_bundle: str | None):
    """``settings`` with the gateway flags (which win over their env vars)."""
    settings = dataclasses.replace(
        settings, gateway_url=url or settings.gateway_url,
        worker_token=token or settings.worker_token,
        gateway_ca_bundle=ca_bundle or settings.gateway_ca_bundle)
    if settings.worker_token and not settings.gateway_url:
        raise InputError("--token (NOVA_WORKER_TOKEN) is for a gateway: add --gateway URL")
    return settings


def default_apps() -> tuple[str, ...]:
    """synthetic, plus txt2img when its dependencies are importable."""
    import importlib.util

    if importlib.util.find_spec("torch") and importlib.util.find_spec("diffusers"):
        return ("txt2img", "synthetic")
    return ("synthetic",)
