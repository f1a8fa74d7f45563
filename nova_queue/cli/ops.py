"""Operating a long-running pool (admin): ``purge`` finished jobs from Redis now, ``doctor``
checks (and repairs) a namespace's invariants (``nova_queue/doctor/``)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable

import click

from nova_queue.cli.base import Context, fail, handle_errors, pass_ctx, shared_options
from nova_queue.cli.options import Duration
from nova_queue.cli.text import safe_json, visible
from nova_queue.errors import (
    InvalidStateError,
    JobExpiredError,
    JobNotFoundError,
    NovaError,
    StoreError,
)
from nova_queue.keys import JOB_ID_RE
from nova_queue.limits import MAX_RETENTION_S
from nova_queue.models import FINISHED_STATES

#: Entries of the retention index that are not job ids shown one by one; then a count.
SKIPPED_SHOWN = 20


@click.command()
@click.argument("job_ids", nargs=-1, metavar="[JOB]...")
@click.option("--older-than", "older_than_s", type=Duration(MAX_RETENTION_S), default=None,
              metavar="AGE", help="Every finished job that finished longer ago than AGE "
              "(seconds, or 90m, 12h, 3d, 2w).")
@click.option("--results", is_flag=True,
              help="Also delete the jobs' objects in the result store (results, manifest, "
                   "contact sheet, zip).")
@click.option("--dry-run", is_flag=True, help="Only list the jobs that would be purged.")
@click.option("--json", "as_json", is_flag=True, help="Print what was purged as JSON.")
@shared_options()
@pass_ctx
@handle_errors
def purge(ctx: Context, job_ids: tuple[str, ...], older_than_s: int | None, results: bool,
          dry_run: bool, as_json: bool) -> None:
    """Delete finished jobs from Redis now, whatever their retention: each job, its tasks and
    index entries (the gallery and status then say 'purged'). Results in the store stay
    unless --results. A job that has not finished is refused: cancel it first. With
    --older-than, an index entry that is not a job id, or a job Redis refuses, is reported
    and skipped.
    """
    if bool(job_ids) == (older_than_s is not None):
        fail("give JOB ids or --older-than AGE (one of the two)")
    client = ctx.client()
    skipped: list[str] = []
    if job_ids:
        _check_finished(client, job_ids, results)
        chosen = list(dict.fromkeys(job_ids))
    else:
        found = client.finished_before(client.server_time_ms() - 1000 * older_than_s)
        chosen = _job_ids(found, skipped)
    if dry_run:
        for job_id in chosen:
            click.echo(visible(job_id))
        click.echo(f"{len(chosen)} job(s) would be purged", err=True)
        return
    store = ctx.store() if results else None
    done = [row for job_id in chosen
            if (row := _purge_one(client, store, job_id, skip=not job_ids)) is not None]
    if as_json:
        click.echo(safe_json({"purged": done, **({"skipped": skipped} if skipped else {})}))
        return
    for row in done:
        objects = f", {row['objects']} object(s) of the store" if store is not None else ""
        click.echo(f"purged {visible(row['job_id'])}: {row['tasks']} task(s){objects}")
    click.echo(f"{len(done)} job(s) purged", err=True)


def _job_ids(found: Iterable[str], skipped: list[str]) -> list[str]:
    """The job ids among ids read from the retention index; any other entry (an index a
    worker credential can ZADD to) is not a job: it goes to ``skipped``, reported on
    stderr (escaped), and the purge goes on."""
    ids = []
    for job_id in found:
        (ids if JOB_ID_RE.match(job_id) else skipped).append(job_id)
    for bad in skipped[:SKIPPED_SHOWN]:
        click.echo(f"warning: skipped '{visible(bad)}' in the retention index: not a job id",
                   err=True)
    if len(skipped) > SKIPPED_SHOWN:
        click.echo(f"warning: skipped {len(skipped) - SKIPPED_SHOWN} more entries that are "
                   "not job ids", err=True)
    return ids


def _check_finished(client, job_ids: tuple[str, ...], results: bool) -> None:
    """Refuse before deleting anything: a job that runs, or one that is unknown (or already
    expired, unless --results has objects left to delete)."""
    for job_id in job_ids:
        try:
            st = client.job(job_id, with_tasks=False)
        except JobExpiredError:
            if results:
                continue
            raise
        if st.state not in FINISHED_STATES:
            raise NovaError(f"job {visible(job_id)} is {visible(st.state)}: only a finished job "
                            "is purged (cancel it first); nothing was deleted")


def _purge_one(client, store, job_id: str, *, skip: bool = False) -> dict[str, object] | None:
    """Redis first (it refuses a job that runs), then the store. With ``skip`` (jobs found
    by age), a job Redis refuses (gone meanwhile, or not finished after all: its fields
    were forged) is reported and skipped (None), not the end of the purge."""
    from nova_queue.client.retention import delete_results

    try:
        tasks = client.purge(job_id)
    except JobExpiredError:
        if store is None:
            if skip:
                return None  # the retention sweep took it meanwhile
            raise
        tasks = 0  # gone from Redis already; its objects may not be
    except (JobNotFoundError, InvalidStateError) as exc:
        if not skip:
            raise
        click.echo(f"warning: skipped job {visible(job_id)}: {visible(exc)}", err=True)
        return None
    if store is None:
        return {"job_id": job_id, "tasks": tasks}
    try:
        objects = delete_results(store, job_id)
    except StoreError as exc:
        raise StoreError(f"job {job_id} was purged from Redis, but deleting its objects failed "
                         f"({exc}); run 'nova-queue purge {job_id} --results' again") from exc
    return {"job_id": job_id, "tasks": tasks, "objects": objects}


@click.command()
@click.option("--repair", is_flag=True,
              help="Fix what can be fixed without losing a committed result (requeue a task "
                   "found nowhere, recount a job, restore index entries, load the scripts), "
                   "say what was done, then check again.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@shared_options()
@pass_ctx
@handle_errors
def doctor(ctx: Context, repair: bool, as_json: bool) -> None:
    """Check the namespace's invariants: every task in exactly the place its state says, job
    counts equal to their tasks' states, leases of unknown workers, index entries, orphan
    keys, scripts loaded, the protocol version, and Redis settings that break guarantees
    (eviction, persistence). Each problem names the keys involved. Exits 1 while a problem
    remains (warnings do not count); safe on a live pool.
    """
    from nova_queue import doctor as checker

    report = checker.run(ctx.client(check_protocol=False), fix=repair)
    if as_json:
        click.echo(json.dumps(report.to_json()))
    else:
        _show(report)
    sys.exit(0 if report.ok else 1)


def _show(report) -> None:
    c = report.checked
    click.echo(f"namespace {visible(report.namespace)!r}: {c.get('jobs', 0)} jobs, "
               f"{c.get('tasks', 0)} tasks, {c.get('workers', 0)} workers "
               f"({c.get('keys', 0)} keys)")
    for line in report.repaired:
        click.echo(f"repaired: {visible(line)}")
    for f in report.problems + report.warnings:
        keys = f"  [{', '.join(visible(k) for k in f.keys[:4])}]" if f.keys else ""
        click.echo(f"{f.severity} ({f.check}): {visible(f.message)}{keys}")
    n, w = len(report.problems), len(report.warnings)
    verdict = "ok" if report.ok else f"{n} problem{'s' * (n != 1)}"
    click.echo(f"{verdict}, {w} warning{'s' * (w != 1)}")


__all__ = ["doctor", "purge"]
