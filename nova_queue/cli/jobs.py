"""Job commands: enqueue, status, workers, results, cancel."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import click

from nova_queue.apps.registry import load_app
from nova_queue.cli.base import Context, handle_errors, pass_ctx
from nova_queue.connection import redact_url
from nova_queue.cli.options import parse_pairs
from nova_queue.errors import InputError, ObjectNotFoundError
from nova_queue.models import JobStatus
from nova_queue.prompts import read_prompts


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
@click.option("--wait", is_flag=True, help="Show progress with an ETA until the job ends.")
@click.option("--json", "as_json", is_flag=True, help="Print {\"job_id\": ...} (and the final "
              "status with --wait) as JSON.")
@pass_ctx
@handle_errors
def enqueue(ctx: Context, file: str, app: str, params: tuple[str, ...], max_attempts: int | None,
            priority: int, name: str | None, wait: bool, as_json: bool) -> None:
    """Enqueue a job: one task per prompt line of FILE (- reads stdin).

    Lines are UTF-8, split on newlines; blank lines and lines starting with # are skipped.
    A file that cannot be used is rejected with its line number and nothing is enqueued.
    """
    prompts = read_prompts(file, stdin=sys.stdin.buffer)
    application = load_app(app)
    parsed = application.parse_params(parse_pairs(params, "-p"))
    specs = application.make_tasks(prompts, parsed)
    client = ctx.client()
    default_name = "stdin" if file == "-" else Path(file).name
    job_id = client.enqueue(app, specs, params=parsed, priority=priority,
                            max_attempts=max_attempts, name=name or default_name)
    if not wait:
        click.echo(json.dumps({"job_id": job_id}) if as_json else job_id)
        return
    if not as_json:
        click.echo(job_id)
    status = wait_for_job(client, job_id, progress=not as_json)
    if as_json:
        click.echo(json.dumps({"job_id": job_id, **status.to_json(with_tasks=False)}))
    else:
        click.echo(summary(status))
    if status.state != "done" or status.failed:
        sys.exit(1)


def wait_for_job(client, job_id: str, *, progress: bool) -> JobStatus:
    """Block until the job ends, following the event stream; draw a progress bar."""
    after = client.last_event_id()
    status = client.job(job_id, with_tasks=False)
    bar = click.progressbar(length=status.total, label=f"job {job_id}", show_eta=True,
                            show_pos=True, file=sys.stderr) if progress else None
    shown = 0
    try:
        if bar:
            bar.__enter__()
        while True:
            terminal = status.terminal
            if bar and terminal > shown:
                bar.update(terminal - shown)
                shown = terminal
            if status.finished:
                return status
            events = client.events(after, count=1000, block_ms=1000)
            if events:
                after = events[-1].id
            status = client.job(job_id, with_tasks=False)
    finally:
        if bar:
            bar.__exit__(None, None, None)


def summary(status: JobStatus) -> str:
    """One line: state and counts."""
    secs = ""
    if status.started_ms and status.finished_ms:
        secs = f" in {(status.finished_ms - status.started_ms) / 1000:.1f} s"
    return (f"job {status.job_id} {status.state}{secs}: {status.done} done, "
            f"{status.failed} failed, {status.cancelled} cancelled of {status.total}")


def _short(text: str, n: int) -> str:
    text = text.replace("\n", " ")
    return text if len(text) <= n else text[: n - 1] + "…"


@click.command()
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True, help="Print the job and its tasks as JSON.")
@pass_ctx
@handle_errors
def status(ctx: Context, job_id: str, as_json: bool) -> None:
    """Show a job's progress and every task's state, worker and attempts."""
    st = ctx.client().job(job_id)
    if as_json:
        click.echo(json.dumps(st.to_json(), ensure_ascii=False))
        return
    click.echo(f"job {st.job_id}  app {st.app}  state {st.state}  name {st.name!r}")
    click.echo(f"  {st.total} tasks: {st.pending} pending, {st.leased} running, {st.done} done, "
               f"{st.failed} failed, {st.cancelled} cancelled")
    click.echo(f"  {'#':>5}  {'STATE':9} {'WORKER':20} {'BACKEND':7} {'ATT':>3} {'GEN':>3}  PROMPT")
    for t in st.tasks:
        who = t.worker or (f"(was {t.last_worker[:14]})" if t.last_worker else "-")
        click.echo(f"  {t.index:>5}  {t.state:9} {_short(who, 20):20} {t.backend or '-':7} "
                   f"{t.attempts:>3} {t.lease_gen:>3}  {_short(t.input, 60)}")


def _fmt(v: float | None, unit: str = "") -> str:
    return "-" if v is None else f"{v:.3g}{unit}"


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the workers as a JSON list.")
@click.option("--all", "include_gone", is_flag=True, help="Include lost and stopped workers.")
@pass_ctx
@handle_errors
def workers(ctx: Context, as_json: bool, include_gone: bool) -> None:
    """List workers by host: backend, device, state, speed estimates and counts."""
    found = ctx.client().workers(include_gone=include_gone or as_json)
    if as_json:
        click.echo(json.dumps([w.to_json() for w in found], ensure_ascii=False))
        return
    if not found:
        click.echo("no workers")
        return
    host = None
    for w in found:
        if w.host_id != host:
            host = w.host_id
            same = sum(1 for x in found if x.host_id == host)
            click.echo(f"host {w.host or '?'} ({same} worker{'s' if same > 1 else ''})")
        first = w.speeds.get(w.apps[0], {}) if w.apps else {}
        click.echo(
            f"  {w.name[:20]:20} {w.state:7} {w.backend:5} {_short(w.device, 28):28} "
            f"done {w.tasks_done:<5} failed {w.failures:<3} bench {_fmt(first.get('bench_s'), 's')} "
            f"ema {_fmt(first.get('ema_s'), 's')} cold {_fmt(first.get('cold_s'), 's')} "
            f"[{','.join(w.apps)}]")


@click.command()
@click.argument("job_id")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Folder to write the results into (created).")
@pass_ctx
@handle_errors
def results(ctx: Context, job_id: str, out_dir: str) -> None:
    """Download every committed result of a job, and its artifacts, into --out."""
    client = ctx.client()
    st = client.job(job_id)
    store = ctx.store()
    out = Path(out_dir)
    try:
        written, missing, artifacts = _download(store, job_id, st, out)
    except OSError as exc:
        raise InputError(f"cannot write to {out}: {exc.strerror or exc}") from None
    click.echo(f"wrote {written} result(s) and {artifacts} artifact(s) of job {job_id} to {out}")
    if missing:
        raise InputError(f"{len(missing)} committed result(s) are missing from the store: "
                         f"{', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}")


def _download(store, job_id: str, st: JobStatus, out: Path) -> tuple[int, list[str], int]:
    out.mkdir(parents=True, exist_ok=True)
    written, missing = 0, []
    for t in st.tasks:
        if t.state != "done" or not t.result:
            continue
        ext = t.result.rsplit(".", 1)[-1] if "." in t.result else "bin"
        try:
            _write(out / f"{t.index:05d}.{ext}", store.get(t.result).data)
            written += 1
        except ObjectNotFoundError:
            missing.append(t.result)
    artifacts = 0
    for key in store.list(f"jobs/{job_id}/"):
        if key.startswith(f"jobs/{job_id}/results/"):
            continue
        try:
            _write(out / key.rsplit("/", 1)[-1], store.get(key).data)
            artifacts += 1
        except ObjectNotFoundError:
            continue
    return written, missing, artifacts


def _write(path: Path, data: bytes) -> None:
    """Write atomically: a reader never sees half a file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@click.command()
@click.argument("job_id")
@pass_ctx
@handle_errors
def cancel(ctx: Context, job_id: str) -> None:
    """Cancel a job: pending tasks are cancelled, running results will be rejected."""
    client = ctx.client()
    client.cancel(job_id)
    st = client.job(job_id, with_tasks=False)
    click.echo(f"cancelled job {job_id}: {st.cancelled} task(s) cancelled, {st.done} done, "
               f"{st.leased} still running (their results will be rejected)")




@click.command("load-scripts")
@pass_ctx
@handle_errors
def load_scripts(ctx: Context) -> None:
    """Load nova-queue's Lua scripts into Redis (admin; after a restart or failover).

    Workers with a restricted ACL user may only EVALSHA scripts an admin loaded.
    """
    client = ctx.client()
    shas = client.scripts.load(client.redis)
    click.echo(f"loaded {len(shas)} scripts into {redact_url(ctx.settings.redis_url)}")
