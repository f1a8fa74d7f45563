"""``nova-queue results``: a job's committed results and its artifacts, downloaded.

Nothing is copied on trust. A task's ``result`` field is used only if it is the key that
the task's own lease writes (:func:`nova_queue.stores.own_result_ext`: its job, index,
``lease_gen`` and ``attempt_id``), so a field pointing into another job is refused. Job
artifacts are fetched by their known names only (:class:`ArtifactKeys`); any other object
under ``jobs/<job>/`` is skipped with a warning, never written over a result.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from pathlib import Path

import click

from nova_queue.cli.base import Context, handle_errors, pass_ctx, shared_options
from nova_queue.cli.text import visible
from nova_queue.errors import InputError, ObjectNotFoundError
from nova_queue.models import JobStatus
from nova_queue.stores import ArtifactKeys, ResultStore, own_result_ext

#: Unknown objects named one by one before the rest are only counted.
_NAMED = 5


@dataclasses.dataclass
class Download:
    """What one ``results`` run wrote and left out."""

    written: int = 0
    artifacts: int = 0
    missing: list[str] = dataclasses.field(default_factory=list)
    rejected: list[int] = dataclasses.field(default_factory=list)
    #: The first few objects under jobs/<job>/ that are neither results nor artifacts.
    unknown: list[str] = dataclasses.field(default_factory=list)
    unknown_count: int = 0


@click.command()
@click.argument("job_id")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Folder to write the results into (created).")
@shared_options()
@pass_ctx
@handle_errors
def results(ctx: Context, job_id: str, out_dir: str) -> None:
    """Download every committed result of a job, and its artifacts, into --out.

    Artifacts (manifest.json, contact-sheet.png, JOB.zip) exist once a running
    'nova-queue post-worker' has built them for the finished job.
    """
    from nova_queue.results import Results

    client = ctx.client()
    st = client.job(job_id)
    out = Path(out_dir)
    try:
        got = download(Results(client.redis, client.keys, ctx.store()), st, out)
    except OSError as exc:
        raise InputError(f"cannot write to {out}: {exc.strerror or exc}") from None
    for index in got.rejected:
        click.echo(f"warning: task {index}: its result key is not one its own lease writes; "
                   "skipped", err=True)
    for key in got.unknown:
        click.echo(f"warning: skipped {visible(key)}: not a result or a known artifact", err=True)
    if got.unknown_count > len(got.unknown):
        click.echo(f"warning: skipped {got.unknown_count - len(got.unknown)} more unknown "
                   "objects", err=True)
    click.echo(f"wrote {got.written} result(s) and {got.artifacts} artifact(s) of job "
               f"{visible(job_id)} to {out}")
    if not got.artifacts:
        click.echo(f"note: {no_artifacts_note(st)}", err=True)
    if got.missing or got.rejected:
        shown = ", ".join(visible(k) for k in got.missing[:5])
        raise InputError(
            f"{len(got.missing) + len(got.rejected)} committed result(s) not written: "
            f"{len(got.missing)} missing from the store{f' ({shown})' if shown else ''}, "
            f"{len(got.rejected)} with a foreign result key")


def no_artifacts_note(st: JobStatus) -> str:
    """Why a job has no artifacts: they come from a post-worker, after the job finished."""
    names = f"manifest.json, contact-sheet.png and {st.job_id}.zip"
    if st.finished:
        return (f"no artifacts yet: a running 'nova-queue post-worker' builds {names} for "
                "finished jobs (is one running?)")
    return (f"no artifacts yet: the job has not finished; a running 'nova-queue post-worker' "
            f"builds {names} when it does")


def download(store: ResultStore, st: JobStatus, out: Path) -> Download:
    """Write ``st``'s committed results and known artifacts into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    got = Download()
    for t in st.tasks:
        if t.state != "done" or not t.result:
            continue
        ext = own_result_ext(t)
        if ext is None:
            got.rejected.append(t.index)
            continue
        try:
            _write(out / f"{t.index:05d}.{ext}", store.get(t.result).data)
            got.written += 1
        except ObjectNotFoundError:
            got.missing.append(t.result)
    known = set(ArtifactKeys.for_job(st.job_id).to_json().values())
    for key in sorted(known):
        try:
            _write(out / key.rsplit("/", 1)[-1], store.get(key).data)
            got.artifacts += 1
        except ObjectNotFoundError:
            continue
    results_prefix = f"jobs/{st.job_id}/results/"  # results of other leases: not ours to judge
    for key in store.list(f"jobs/{st.job_id}/"):
        if key not in known and not key.startswith(results_prefix):
            got.unknown_count += 1
            if len(got.unknown) < _NAMED:
                got.unknown.append(key)
    return got


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
