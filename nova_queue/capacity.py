"""Autoscaling on the prediction: ``nova-queue plan`` and the ``/metrics`` gauges read this.

Per app, for every unfinished job with a deadline: the predicted finish with the live pool
(``forecast.py``: the claim's least-cost plan, else the fastest finish), the slack (deadline
minus that finish, seconds; negative: late), and how many more workers of each observed
class (backend, speed, price) would meet it (``workers_needed``: each class on its own).
Then which idle priced workers could leave: those no deadline plan of the app uses, while
no job of the app without a deadline waits (such a job takes every worker).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from nova_queue.errors import TaskNotFoundError
from nova_queue.forecast import PoolWorker, forecast, pool_of, workers_needed
from nova_queue.models import JobStatus

#: Jobs looked at (the most recent ones).
JOBS_PLANNED = 1000


def _mean_cost(client: Any, job: JobStatus) -> float:
    """A job's task cost, from its last task (a job's tasks are usually of one size)."""
    try:
        return client.task(f"{job.job_id}:{max(job.total - 1, 0)}").cost or 1.0
    except TaskNotFoundError:  # gone (expired, purged): the default
        return 1.0


def plan(client: Any, limit: int = JOBS_PLANNED) -> dict[str, Any]:
    """``{"now_ms", "apps": {app: {"workers": {class: n}, "jobs": [...], "can_leave":
    [...]}}}`` for the live pool (``client``: a NovaClient)."""
    now_ms = client.server_time_ms()
    workers = client.workers(include_gone=False)
    jobs = [j for j in client.jobs(limit) if j.state in ("queued", "running")
            and j.pending + j.leased > 0]
    apps = sorted({j.app for j in jobs} | {a for w in workers if w.alive for a in w.apps})
    return {"now_ms": now_ms,
            "apps": {app: app_plan(client, app, pool_of(workers, app, now_ms),
                                   [j for j in jobs if j.app == app], now_ms) for app in apps}}


def app_plan(client: Any, app: str, pool: list[PoolWorker], jobs: list[JobStatus],
             now_ms: int) -> dict[str, Any]:
    """One app's part of :func:`plan`: its pool by class, its deadline jobs, who can leave."""
    used: set[str] = set()
    rows = []
    for job in (j for j in jobs if j.deadline_ms is not None):
        cost, left = _mean_cost(client, job), job.pending + job.leased
        fc = forecast(pool, left, cost, now_ms, job.deadline_ms)
        used |= set(fc.tasks)
        rows.append({
            "job_id": job.job_id, "name": job.name, "deadline_ms": job.deadline_ms,
            "tasks_left": left, "predicted_finish_ms": fc.finish_ms, "on_time": fc.meets,
            "slack_s": (None if fc.finish_ms is None
                        else round((job.deadline_ms - fc.finish_ms) / 1000, 3)),
            "predicted_cost": round(job.cost + fc.cost, 9),
            "workers_needed": workers_needed(pool, left, cost, now_ms, job.deadline_ms)})
    open_ended = any(j.deadline_ms is None for j in jobs)  # takes every worker: none leaves
    leave = [] if open_ended else [
        {"worker": w.worker_id, "name": w.name, "class": w.worker_class, "cost_per_hour": w.price}
        for w in sorted(pool, key=lambda w: -w.price)
        if w.price > 0 and w.free_in_s == 0 and w.worker_id not in used]
    return {"workers": dict(Counter(w.worker_class for w in pool)), "jobs": rows,
            "can_leave": leave}


def needed_by_class(app_plan: dict[str, Any]) -> dict[str, int]:
    """Per class, the most workers any one deadline job of the app needs (None: a class that
    cannot help counts 0): what the ``workers_needed`` gauge exports."""
    out: dict[str, int] = {c: 0 for c in app_plan["workers"]}
    for row in app_plan["jobs"]:
        for c, n in row["workers_needed"].items():
            out[c] = max(out.get(c, 0), n or 0)
    return out
