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
from nova_queue.cannot_run import Runners, blocked_text
from nova_queue.cli.base import Context, handle_errors, pass_ctx, shared_options
from nova_queue.cli.options import Duration, parse_pairs
from nova_queue.cli.text import safe_json, short, visible
from nova_queue.cli.wait import StoppedWaiting, stopped_line, summary, wait_for_job
from nova_queue.client.worker import STAGING_ABANDONED_MS
from nova_queue.connection import redact_url
from nova_queue.errors import JobNotFoundError
from nova_queue.limits import MAX_RETENTION_S
from nova_queue.models import JobStatus, TaskSpec
from nova_queue.placement import parse_requirements
from nova_queue.prompts import read_prompts
from nova_queue.terms import money_text, parse_budget, parse_deadline


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
@click.option("--deadline", default=None, metavar="WHEN",
              help="When the job should be done: 30m, 2h, 18:00 (its next occurrence) or "
                   "ISO-8601 (2026-12-04T18:00); it then runs on the cheapest workers that "
                   "still finish it in time.")
@click.option("--budget", default=None, metavar="DOLLARS",
              help="What the job may spend (predicted, at the workers' --cost-per-hour): past "
                   "it, it waits for cheaper capacity.")
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
            deadline: str | None, budget: str | None, max_bytes: int | None, wait: bool,
            as_json: bool) -> None:
    """Enqueue a job: one task per prompt line of FILE (- reads stdin).

    Lines are UTF-8, split on newlines; blank lines and lines starting with # are skipped.
    FILE must be a regular file of at most --max-bytes; one that cannot be used is rejected
    with its line number and nothing is enqueued. Prints the job id; warns on stderr when
    no live worker serves the app or meets --require, or those that do cannot run it (the
    job waits until one joins).
    """
    reqs = parse_requirements(requires)
    budget_usd = None if budget is None else parse_budget(budget)
    application, parsed, specs = job_tasks(ctx, file, app, params, max_bytes)
    client = ctx.client()
    model = application.model_key(parsed)
    deadline_ms = None if deadline is None else parse_deadline(deadline, client.server_time_ms())
    job_id = client.enqueue(
        app, specs, params=parsed, priority=priority, max_attempts=max_attempts,
        name=name or ("stdin" if file == "-" else Path(file).name), timeout_s=timeout_s,
        retention_s=retention_s, requires=reqs, owner=owner, model=model,
        deadline=None if deadline_ms is None else _at(deadline_ms), budget=budget_usd)
    if not as_json:
        click.echo(job_id)  # once: the library logs it at DEBUG only
    elif not wait:
        click.echo(json.dumps({"job_id": job_id}))
    if note := no_worker_note(client, app, reqs, model):
        click.echo(f"warning: {note}; the job waits until one joins", err=True)
    if wait:
        follow(client, job_id, as_json)


def _at(ms: int):
    import datetime

    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc)


def job_tasks(ctx: Context, file: str, app: str, params: tuple[str, ...],
              max_bytes: int | None) -> tuple[AppSpec, dict[str, Any], list[TaskSpec]]:
    """The app, its parsed params and the tasks of FILE's prompts (nothing sent yet)."""
    prompts = read_prompts(file, stdin=sys.stdin.buffer,
                           max_bytes=max_bytes or ctx.settings.max_prompt_bytes)
    application = load_app(app)
    parsed = application.parse_params(parse_pairs(params, "-p"))
    return application, parsed, application.make_tasks(prompts, parsed)


def follow(client, job_id: str, as_json: bool) -> None:
    """``enqueue --wait``: follow the job to its end; exit 1 unless every task is done (a
    line on stderr says why), 130 after Ctrl-C (which stops the waiting, not the job)."""
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
        click.echo(f"error: {not_done_line(status)}", err=True)
        sys.exit(1)


def not_done_line(st: JobStatus) -> str:
    """Why a finished job is not a success: it failed, some tasks failed, or it was
    cancelled; with where to read the errors."""
    see = f"; 'nova-queue status {visible(st.job_id)}' shows each task's error"
    if st.state == "failed":
        return (f"job {visible(st.job_id)} failed: {st.failed} of its {st.total} tasks failed, "
                f"none done{see}")
    if st.state == "cancelled":
        return f"job {visible(st.job_id)} was cancelled ({st.done} of {st.total} tasks done)"
    return f"job {visible(st.job_id)}: {st.failed} of its {st.total} tasks failed{see}"


def no_worker_note(client, app: str, requires=(), model: str = "",
                   runners: Runners | None = None) -> str | None:
    """Why a job of ``app`` (with ``requires``, needing ``model``) cannot run right now: no
    live worker serves the app, none that does meets the requirements, or those that do
    cannot prepare it (each one's reason); None if one can."""
    runners = runners or client.who_can_run(app, requires, model)
    if runners.eligible:
        return None
    if runners.blocked:
        return visible(blocked_text(runners.blocked))
    if requires and client.eligible_workers(app):
        return f"no live worker of app '{visible(app)}' fits: " + visible(
            client.unmet_requirement(app, requires))
    live = client.live_apps()
    serving = ", ".join(f"{visible(a)} ×{n}" for a, n in live.items())
    who = f"live workers serve: {serving}" if live else "no worker is live"
    return f"no live worker serves app '{visible(app)}' ({who})"


@click.command()
@click.argument("job_id", required=False)
@click.option("--limit", type=click.IntRange(1, 1000), default=20, show_default=True,
              help="Jobs listed without JOB_ID.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the job, its tasks, eligible_workers (live workers that can run "
                   "it), cannot_run (live workers that cannot prepare it, and why) and "
                   "waiting (why no live worker can run it, or null) as JSON; without "
                   "JOB_ID, the jobs as a JSON list.")
@shared_options()
@pass_ctx
@handle_errors
def status(ctx: Context, job_id: str | None, limit: int, as_json: bool) -> None:
    """Show a job's progress and every task's state, worker, attempts and error; without
    JOB_ID, the most recent jobs with their done, failed and cancelled counts.

    A finished job is done (a task or more done; FAILED counts the others), failed (not
    one task done) or cancelled. Says when no live worker can run the job (none serves its
    app, meets its requirements, or could prepare it: each worker's reason), and shows a
    job still being enqueued (or abandoned by a killed enqueue) as state 'staging'.
    """
    client = ctx.client()
    if job_id is None:
        _show_jobs(client.jobs(limit), as_json)
        return
    try:
        st = client.job(job_id)
    except JobNotFoundError:
        staging = client.staging_job(job_id)
        if staging is None:
            raise
        _show_staging(staging, client, as_json)
        return
    runners = client.who_can_run(st.app, st.requires, st.model)
    waiting = (no_worker_note(client, st.app, st.requires, st.model, runners)
               if not runners.eligible and not st.finished and st.pending else None)
    terms = _terms(client, st, runners.eligible)
    if as_json:
        click.echo(safe_json({**st.to_json(), **terms, "eligible_workers": len(runners.eligible),
                              "cannot_run": [b.to_json() for b in runners.blocked],
                              "waiting": waiting}))
        return
    _show_status(st, terms, waiting, bool(runners.blocked))


def _show_status(st: JobStatus, terms: dict[str, Any], waiting: str | None,
                 blocked: bool) -> None:
    """``status JOB`` as text: counts, terms, why it waits, every task."""
    click.echo(f"job {visible(st.job_id)}  app {visible(st.app)}  "
               f"state {visible(st.state)}  name '{visible(st.name)}'")
    click.echo(f"  {st.total} tasks: {st.pending} pending, {st.leased} running, {st.done} done, "
               f"{st.failed} failed, {st.cancelled} cancelled"
               + (f", {st.verifying} awaiting verification" if st.verifying else ""))
    if st.deadline_ms is not None or st.budget is not None or st.cost:
        click.echo(f"  {terms_line(terms)}")
    if waiting and blocked:
        click.echo(f"  waiting: {waiting}")
    elif waiting:
        click.echo(f"  warning: {waiting}; its tasks wait until one joins")
    click.echo(f"  {'#':>5}  {'STATE':9} {'WORKER':20} {'BACKEND':7} {'ATT':>3} {'GEN':>3}  "
               f"{'ERROR':28} PROMPT")
    for t in st.tasks:
        who = t.worker_name or (f"(was {t.last_worker_id[:14]})" if t.last_worker_id else "-")
        error = f"{t.error_kind}: {t.error}" if t.error else "-"
        click.echo(f"  {t.index:>5}  {short(t.state, 9):9} {short(who, 20):20} "
                   f"{short(t.backend or '-', 7):7} {t.attempt_count:>3} {t.lease_gen:>3}  "
                   f"{short(error, 28):28} {short(t.input, 60)}")


def _terms(client, st: JobStatus, eligible: list[str]) -> dict[str, Any]:
    """The deadline against the live pool's prediction, and the money (forecast.py)."""
    from nova_queue.forecast import job_forecast, pool_of, terms_json

    now_ms = client.server_time_ms()
    pool = pool_of(client.workers(include_gone=False), st.app, now_ms, eligible)
    return terms_json(st, job_forecast(st, pool, now_ms))


def terms_line(t: dict[str, Any]) -> str:
    """``deadline 18:00:00 UTC: predicted 17:52:10 UTC, on time; cost so far $0.12, predicted
    $0.40, budget $5.00; placement: ...``"""
    def at(ms: int | None) -> str:
        return "-" if ms is None else time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ms / 1000))

    parts = []
    if t["deadline_ms"] is not None:
        verdict = {True: "on time", False: "LATE", None: "no live worker"}[t["on_time"]]
        parts.append(f"deadline {at(t['deadline_ms'])}: predicted finish "
                     f"{at(t['predicted_finish_ms'])}, {verdict}")
    money = f"cost so far {money_text(t['cost_so_far'])}, predicted {money_text(t['predicted_cost'])}"
    if t["budget"] is not None:
        money += f", budget {money_text(t['budget'])}"
    return "; ".join([*parts, money, f"placement: {t['placement']}"])


def _show_jobs(jobs: list[JobStatus], as_json: bool) -> None:
    """``status`` without a job: the most recent jobs, newest first (staging ones left out,
    as the gallery's list and ``/api/jobs`` do)."""
    jobs = [j for j in jobs if j.state != "staging"]
    if as_json:
        click.echo(safe_json([j.to_json(with_tasks=False) for j in jobs]))
        return
    if not jobs:
        click.echo("no jobs")
        return
    click.echo(f"{'JOB':16} {'STATE':9} {'DONE':>6} {'FAILED':>6} {'CANCEL':>6} {'TOTAL':>6}  "
               f"{'APP':12} NAME")
    for j in jobs:  # a job id whole (a cut one is of no use), however long
        click.echo(f"{visible(j.job_id):16} {short(j.state, 9):9} {j.done:>6} {j.failed:>6} "
                   f"{j.cancelled:>6} {j.total:>6}  {short(j.app, 12):12} {short(j.name, 40)}")


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
            + (f" token {visible(w.token)}" if w.token else "")
            + (f" ${w.cost_per_hour:g}/h" if w.cost_per_hour else ""))
        if w.quarantined:
            click.echo(f"    QUARANTINED: {visible(short(w.quarantine_reason, 160))}")
        for m in w.cannot_run:
            what = f"{m.app} model {m.model}" if m.model else m.app
            click.echo(f"    cannot run {visible(what)}: {visible(short(m.reason, 160))}")


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
