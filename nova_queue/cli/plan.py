"""``nova-queue plan``: what the pool needs to meet its deadlines (nova_queue/capacity.py)."""

from __future__ import annotations

import time

import click

from nova_queue.cli.base import Context, handle_errors, pass_ctx, shared_options
from nova_queue.cli.text import safe_json, visible
from nova_queue.terms import money_text


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the plan as one JSON object.")
@shared_options()
@pass_ctx
@handle_errors
def plan(ctx: Context, as_json: bool) -> None:
    """Per app, every unfinished job with a deadline: the predicted finish with the live
    pool, how many more workers of each observed class (backend, speed, price) would meet
    it, and which idle priced workers could leave. For autoscalers: docs/DEPLOY.md.
    """
    from nova_queue.capacity import plan as make_plan

    report = make_plan(ctx.client())
    if as_json:
        click.echo(safe_json(report))
        return
    if not report["apps"]:
        click.echo("no live workers and no jobs")
    for app, p in report["apps"].items():
        pool = ", ".join(f"{n}× {visible(c)}" for c, n in p["workers"].items()) or "none"
        click.echo(f"app {visible(app)}: live workers {pool}")
        for row in p["jobs"]:
            click.echo(f"  job {visible(row['job_id'])}: {row['tasks_left']} tasks left, "
                       f"{_verdict(row)}, predicted cost {money_text(row['predicted_cost'])}")
            if not row["on_time"]:
                need = [f"+{n} {visible(c)}" for c, n in row["workers_needed"].items() if n]
                click.echo(f"    to meet it, one of: {', '.join(need) or 'no class finishes a task in time'}")
        for w in p["can_leave"]:
            click.echo(f"  idle, could leave: {visible(w['name'] or w['worker'])} "
                       f"({visible(w['class'])})")


def _verdict(row: dict) -> str:
    def at(ms: int) -> str:
        return time.strftime("%H:%M:%S UTC", time.gmtime(ms / 1000))

    if row["predicted_finish_ms"] is None:
        return f"deadline {at(row['deadline_ms'])}, no live worker"
    verdict = "on time" if row["on_time"] else "LATE"
    return (f"deadline {at(row['deadline_ms'])}, predicted {at(row['predicted_finish_ms'])} "
            f"({verdict}, slack {row['slack_s']:+.0f} s)")
