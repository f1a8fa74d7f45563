"""The gallery's texts of a job's terms: its deadline against the live pool's prediction,
what it cost and is predicted to cost (``nova_queue/forecast.py``), and which workers ran it
at what price."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from nova_queue.forecast import job_forecast, pool_of, terms_json
from nova_queue.models import JobStatus, TaskInfo
from nova_queue.terms import money_text
from nova_queue.web.text import fmt_seconds
from nova_queue.worker_info import WorkerInfo

#: Tasks the job page reads to say which workers ran a job (the first ones).
USED_SCAN = 5000


def terms_view(job: JobStatus, workers: Sequence[WorkerInfo], eligible: Sequence[str],
               now_ms: int) -> dict[str, Any]:
    """The deadline against the live pool's prediction and the money (``forecast.py``):
    its JSON and ``terms_text`` (empty for a job without a deadline, budget or cost)."""
    fc = job_forecast(job, pool_of(workers, job.app, now_ms, eligible), now_ms)
    t = terms_json(job, fc)
    parts = []
    if job.deadline_ms is not None and not job.finished:
        eta = fmt_seconds((fc.finish_ms - now_ms) / 1000) if fc.finish_ms else "–"
        left = fmt_seconds(max(job.deadline_ms - now_ms, 0) / 1000)
        verdict = {True: "on time", False: "behind its deadline", None: "no live worker"}
        parts.append(f"deadline in {left}, predicted finish in {eta}: {verdict[fc.meets]}")
    elif job.deadline_ms is not None:
        done_in_time = (job.finished_ms or 0) <= job.deadline_ms
        parts.append("finished by its deadline" if done_in_time else "finished after its deadline")
    if job.deadline_ms is not None or job.budget is not None or job.cost:
        money = f"cost so far {money_text(job.cost)}"
        if not job.finished:
            money += f", predicted {money_text(t['predicted_cost'])}"
        if job.budget is not None:
            money += f" of a {money_text(job.budget)} budget"
        parts += [money, f"placement: {t['placement']}"]
    return {**t, "terms_text": " · ".join(parts)}


def used_text(tasks: Iterable[TaskInfo], workers: Mapping[str, WorkerInfo]) -> str:
    """Which workers ran (or run) the job's tasks, most first, with their price."""
    counts: dict[str, int] = {}
    for t in tasks:
        if t.worker_id and t.state in ("leased", "done", "verifying"):
            counts[t.worker_id] = counts.get(t.worker_id, 0) + 1
    out = []
    for wid, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        w = workers.get(wid)
        price = f" at {money_text(w.cost_per_hour)}/h" if w and w.cost_per_hour else ""
        out.append(f"{w.name if w else wid} ({n}{price})")
    return ", ".join(out)
