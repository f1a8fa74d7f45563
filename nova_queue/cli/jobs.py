"""Job commands: enqueue, status, workers, cancel, load-scripts (results: ``results.py``)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import click

from nova_queue.apps.base import AppSpec
from nova_queue.apps.registry import load_app
from nova_queue.cli.base import Context, handle_errors, pass_ctx, shared_options
from nova_queue.cli.options import Duration, parse_pairs
from nova_queue.cli.text import safe_json, short, visible
from nova_queue.cli.wait import StoppedWaiting, stopped_line, summary, wait_for_job
from nova_queue.connection import redact_url
from nova_queue.errors import JobNotFoundError
from nova_queue.limits import MAX_RETENTION_S
from nova_queue.models import JobStatus, TaskSpec
from nova_queue.placement import parse_requirements
from nova_queue.prompts import read_prompts
from nova_queue.worker_calls import STAGING_ABANDONED_MS


# long: one decorator per option of the command (its body is 23 lines)
@click.command()
@click.argument("file", metavar="FILE|-")
@click.option("--app", default="txt2img", show_default=True, envvar="NOVA_APP",
              help="App that runs the prompts. Env NOVA_APP.")
@click.option("-p", "--param", "params", multiple=True, metavar="KEY=VALUE",
              help="App parameter, repeatable (e.g. -p steps=1 -p seed=42).")
@click.option("--max-attempts", type=click.IntRange(1, 100), default=None,
              help="Attempts per task before it fails.  [default: NOVA_MAX_ATTEMPTS or 3]")
@click.option("--priority", type=click.IntRange(-1000, 1000), default=0, show_default=True,
              help="Higher runs first.")
@click.option("--name", default=None, help="Job name shown in the gallery [default: file name].")
@click.option("--timeout", "timeout_s", type=click.FloatRange(0.001, 604_800), default=None,
              metavar="SECONDS",
              help="Run-time limit per task: past it the task returns to the queue (an "
                   "attempt is used) and its late result is rejected.  [default: the larger "
                   "of NOVA_TASK_TIMEOUT_FLOOR_S (120) and NOVA_TASK_TIMEOUT_FACTOR (10) x "
                   "the claiming worker's predicted time]")
@click.option("--require", "requires", multiple=True, metavar="REQ",
              help="What a worker's labels must meet, repeatable: key=a,b (one of), key>=n, "
                   "key<=n, quoted for the shell (e.g. --require backend=cuda,rocm --require "
                   "'memory_gb>=12'). Workers' labels: nova-queue workers --json.")
@click.option("--owner", default=None, envvar="NOVA_OWNER",
              help="Whose share of the pool the job uses (fair share).  [default: "
                   "NOVA_OWNER or the login name]")
@click.option("--retention", "retention_s", type=Duration(MAX_RETENTION_S), default=None,
              metavar="AGE",
              help="How long the finished job stays in Redis (seconds, or 90m, 12h, 3d): "
                   "then it is deleted with its tasks; its results stay in the store.  "
                   "[default: NOVA_JOB_RETENTION_S or 604800 (7 days)]")
@click.option("--max-bytes", type=click.IntRange(min=1), default=None, metavar="N",
              help="Refuse prompt input larger than N bytes.  "
                   "[default: NOVA_MAX_PROMPT_BYTES or 67108864 (64 MiB)]")
@click.option("--wait", is_flag=True,
              help="Follow the job until it ends: a progress bar in a terminal, a progress "
                   "line on stderr every few seconds when piped.")
@click.option("--json", "as_json", is_flag=True, help="Print {\"job_id\": ...} (and the final "
              "status with --wait, without progress output) as JSON.")
@shared_options()
@pass_ctx
@handle_errors
def enqueue(ctx: Context, file: str, app: str, params: tuple[str, ...], max_attempts: int | None,
            priority: int, name: str | None, timeout_s: float | None,
            requires: tuple[str, ...], owner: str | None, retention_s: int | None,
            max_bytes: int | None, wait: bool, as_json: bool) -> None:
    """Enqueue a job: one task per prompt line of FILE (- reads stdin).

    Lines are UTF-8, split on newlines; blank lines and lines starting with # are skipped.
    FILE must be a regular file of at most --max-bytes; one that cannot be used is rejected
    with its line number and nothing is enqueued. Prints the job id; warns on stderr when
    no live worker serves the app or meets --require (the job waits until one joins).
    """
    reqs = parse_requirements(requires)
    application, parsed, specs = job_tasks(ctx, file, app, params, max_bytes)
    client = ctx.client()
    job_id = client.enqueue(
        app, specs, params=parsed, priority=priority, max_attempts=max_attempts,
        name=name or ("stdin" if file == "-" else Path(file).name), timeout_s=timeout_s,
        retention_s=retention_s, requires=reqs, owner=owner, model=application.model_key(parsed))
    if not as_json:
        click.echo(job_id)  # once: the library logs it at DEBUG only
    elif not wait:
        click.echo(json.dumps({"job_id": job_id}))
    if note := no_worker_note(client, app, reqs):
        click.echo(f"warning: {note}; the job waits until one joins", err=True)
    if wait:
        follow(client, job_id, as_json)


def job_tasks(ctx: Context, file: str, app: str, params: tuple[str, ...],
              max_bytes: int | None) -> tuple[AppSpec, dict[str, Any], list[TaskSpec]]:
    """The app, its parsed params and the tasks of FILE's prompts (nothing sent yet)."""
    prompts = read_prompts(file, stdin=sys.stdin.buffer,
                           max_bytes=max_bytes or ctx.settings.max_prompt_bytes)
    application = load_app(app)
    parsed = application.parse_params(parse_pairs(params, "-p"))
    return application, parsed, application.make_tasks(prompts, parsed)


def follow(client, job_id: str, as_json: bool) -> None:
    """``enqueue --wait``: follow the job to its end; exit 1 unless every task is done, 130
    after Ctrl-C (which stops the waiting, not the job)."""
    try:
        status = wait_for_job(client, job_id, progress=not as_json)
    except StoppedWaiting as stop:
        click.echo(stopped_line(stop), err=True)
        sys.exit(130)
    if as_json:
        click.echo(json.dumps({"job_id": job_id, **status.to_json(with_tasks=False)}))
    else:
        click.echo(summary(status))
    if status.state != "done" or status.failed:
        sys.exit(1)


def no_worker_note(client, app: str, requires=()) -> str | None:
    """Why a job of ``app`` (with ``requires``) cannot run right now: no live worker serves
    the app, or none that does meets the requirements; None if one can."""
    if client.eligible_workers(app, requires):
        return None
    if requires and client.eligible_workers(app):
        return f"no live worker of app '{visible(app)}' fits: " + visible(
            client.unmet_requirement(app, requires))
    live = client.live_apps()
    serving = ", ".join(f"{visible(a)} ×{n}" for a, n in live.items())
    who = f"live workers serve: {serving}" if live else "no worker is live"
    return f"no live worker serves app '{visible(app)}' ({who})"


@click.command()
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True,
              help="Print the job, its tasks and eligible_workers (live workers serving its "
                   "app) as JSON.")
@shared_options()
@pass_ctx
@handle_errors
def status(ctx: Context, job_id: str, as_json: bool) -> None:
    """Show a job's progress and every task's state, worker and attempts.

    Says when no live worker serves the job's app, and shows a job still being enqueued
    (or abandoned by a killed enqueue) as state 'staging'.
    """
    client = ctx.client()
    try:
        st = client.job(job_id)
    except JobNotFoundError:
        staging = client.staging_job(job_id)
        if staging is None:
            raise
        _show_staging(staging, client, as_json)
        return
    eligible = len(client.eligible_workers(st.app, st.requires))
    if as_json:
        click.echo(safe_json({**st.to_json(), "eligible_workers": eligible}))
        return
    click.echo(f"job {visible(st.job_id)}  app {visible(st.app)}  "
               f"state {visible(st.state)}  name '{visible(st.name)}'")
    click.echo(f"  {st.total} tasks: {st.pending} pending, {st.leased} running, {st.done} done, "
               f"{st.failed} failed, {st.cancelled} cancelled")
    if not eligible and not st.finished and st.pending:
        click.echo(f"  warning: {no_worker_note(client, st.app, st.requires)}; its tasks wait "
                   "until one joins")
    click.echo(f"  {'#':>5}  {'STATE':9} {'WORKER':20} {'BACKEND':7} {'ATT':>3} {'GEN':>3}  PROMPT")
    for t in st.tasks:
        who = t.worker_name or (f"(was {t.last_worker_id[:14]})" if t.last_worker_id else "-")
        click.echo(f"  {t.index:>5}  {short(t.state, 9):9} {short(who, 20):20} "
                   f"{short(t.backend or '-', 7):7} {t.attempt_count:>3} {t.lease_gen:>3}  "
                   f"{short(t.input, 60)}")


def _show_staging(st: JobStatus, client, as_json: bool) -> None:
    """A job that is still being written (or whose producer was killed mid-way)."""
    reaped_ms = st.created_ms + STAGING_ABANDONED_MS
    if as_json:
        click.echo(safe_json({**st.to_json(), "staged": st.staged, "reaped_after_ms": reaped_ms,
                              "eligible_workers": len(client.eligible_workers(st.app,
                                                                              st.requires))}))
        return
    left_min = max(0, reaped_ms - client.server_time_ms()) / 60_000
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(reaped_ms / 1000))
    click.echo(f"job {visible(st.job_id)}  app {visible(st.app)}  state staging  "
               f"name '{visible(st.name)}'")
    click.echo(f"  {st.staged} of {st.total} tasks written: being enqueued, or abandoned by a "
               f"killed enqueue; reap deletes it {STAGING_ABANDONED_MS // 60_000} min after it "
               f"was created ({when}, in {left_min:.0f} min) unless it is published first")


def _fmt(v: float | None, unit: str = "") -> str:
    return "-" if v is None else f"{v:.3g}{unit}"


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the workers as a JSON list.")
@click.option("--all", "include_gone", is_flag=True, help="Include lost and stopped workers.")
@shared_options()
@pass_ctx
@handle_errors
def workers(ctx: Context, as_json: bool, include_gone: bool) -> None:
    """List workers by host: backend, device, state, speed estimates and counts."""
    found = ctx.client().workers(include_gone=include_gone or as_json)
    if as_json:
        click.echo(safe_json([w.to_json() for w in found]))
        return
    if not found:
        click.echo("no workers")
        return
    host = None
    for w in found:
        if w.host_id != host:
            host = w.host_id
            same = sum(1 for x in found if x.host_id == host)
            click.echo(f"host {visible(w.host or '?')} ({same} worker{'s' if same > 1 else ''})")
        first = w.speeds.get(w.apps[0], {}) if w.apps else {}
        click.echo(
            f"  {short(w.name, 20):20} {short(w.state, 7):7} {short(w.backend, 5):5} "
            f"{short(w.device, 28):28} done {w.tasks_done:<5} failed {w.failures:<3} "
            f"bench {_fmt(first.get('bench_s'), 's')} ema {_fmt(first.get('ema_s'), 's')} "
            f"cold {_fmt(first.get('cold_s'), 's')} [{visible(','.join(w.apps))}]"
            + (f" token {visible(w.token)}" if w.token else ""))
        if w.quarantined:
            click.echo(f"    QUARANTINED: {visible(short(w.quarantine_reason, 160))}")


@click.command()
@click.argument("job_id")
@shared_options()
@pass_ctx
@handle_errors
def cancel(ctx: Context, job_id: str) -> None:
    """Cancel a job: pending tasks are cancelled, running results will be rejected."""
    client = ctx.client()
    before = client.job(job_id, with_tasks=False)
    client.cancel(job_id)
    st = client.job(job_id, with_tasks=False)
    counts = (f"{st.cancelled} task(s) cancelled, {st.done} done, {st.leased} still running "
              "(their results will be rejected)")
    if before.state == "cancelled" and st.cancelled == before.cancelled:
        click.echo(f"job {visible(job_id)} was already cancelled: nothing was left to cancel "
                   f"({counts})")
        return
    click.echo(f"cancelled job {visible(job_id)}: {counts}")


@click.command("load-scripts")
@shared_options()
@pass_ctx
@handle_errors
def load_scripts(ctx: Context) -> None:
    """Load nova-queue's Lua scripts into Redis (admin; after a restart or failover).

    Workers with a restricted ACL user may only EVALSHA scripts an admin loaded.
    """
    client = ctx.client()
    shas = client.scripts.load(client.redis)
    click.echo(f"loaded {len(shas)} scripts into {redact_url(ctx.settings.redis_url)}")
