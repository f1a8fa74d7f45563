"""What the live pool predicts for a job: when it finishes, what it costs, and what a
deadline would need. The same plan the claim follows (``lua/includes/deadline_grant.lua``),
worked out ahead for every task left: ``status``, the job page, ``nova-queue plan`` and
``/metrics`` read it.

A worker is its predicted seconds per cost unit (its moving average, else its startup
benchmark), its price (dollars per hour) and when it is free (its predicted busy-until).
With a deadline, the least-cost plan: the workers of the lowest price per task take what
they finish by the deadline, dearer ones the rest; a job the pool cannot finish in time,
and a job without a deadline, take the fastest finish (each task to the worker that
finishes it first). Tasks are taken as one size: the job's mean cost.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from collections.abc import Iterable, Sequence

from nova_queue.models import JobStatus
from nova_queue.worker_info import WorkerInfo

#: A plan keeps this share of the time left in hand, as the claim does (DEADLINE_SLACK).
DEADLINE_SLACK = 0.05
#: Most tasks a forecast places one by one (the fastest finish); past it, in proportion.
MAX_PLACED = 20_000


@dataclasses.dataclass(frozen=True)
class PoolWorker:
    """One live worker as a plan sees it."""

    worker_id: str
    name: str
    backend: str
    #: predicted seconds per cost unit for the app
    s_per_cost: float
    #: dollars per hour
    price: float
    #: seconds until it is free (0: idle)
    free_in_s: float

    @property
    def worker_class(self) -> str:
        """What ``plan`` counts workers by: backend, speed and price."""
        return f"{self.backend or 'cpu'}/{self.s_per_cost:.3g}s/${self.price:g}h"


@dataclasses.dataclass(frozen=True)
class Forecast:
    """A plan for the tasks left: when they are done (epoch ms), what they cost (dollars),
    how many each worker takes, and whether the plan meets the deadline (None: none)."""

    finish_ms: int | None
    cost: float
    tasks: dict[str, int]
    meets: bool | None


def pool_of(workers: Iterable[WorkerInfo], app: str, now_ms: int,
            eligible: Sequence[str] | None = None) -> list[PoolWorker]:
    """The live workers of ``app`` with an estimate (``eligible``: only these ids)."""
    out = []
    for w in workers:
        speeds = w.speeds.get(app) or {}
        s = speeds.get("ema_s") if speeds.get("samples") else None
        s = s or speeds.get("bench_s")
        if (not w.alive or w.quarantined or app not in w.apps or not s or s <= 0
                or (eligible is not None and w.worker_id not in eligible)):
            continue
        free = max(((w.busy_until_ms or now_ms) - now_ms) / 1000, 0.0)
        out.append(PoolWorker(w.worker_id, w.name, w.backend, float(s), w.cost_per_hour, free))
    return out


def _fastest(pool: Sequence[PoolWorker], n: int, cost: float) -> tuple[float, dict[str, int]]:
    heap = [(w.free_in_s + w.s_per_cost * cost, i) for i, w in enumerate(pool)]
    heapq.heapify(heap)
    counts: dict[str, int] = {}
    end = 0.0
    for _ in range(n):
        t, i = heapq.heappop(heap)
        end = max(end, t)
        counts[pool[i].worker_id] = counts.get(pool[i].worker_id, 0) + 1
        heapq.heappush(heap, (t + pool[i].s_per_cost * cost, i))
    return end, counts


def _cheapest(pool: Sequence[PoolWorker], n: int, cost: float,
              within_s: float) -> tuple[float, dict[str, int]] | None:
    left, end, counts = n, 0.0, {}
    for w in sorted(pool, key=lambda w: (w.price * w.s_per_cost, w.s_per_cost)):
        task = w.s_per_cost * cost
        k = min(left, max(math.floor((within_s - w.free_in_s) / task + 1e-9), 0))
        if k:
            counts[w.worker_id], left = k, left - k
            end = max(end, w.free_in_s + k * task)
    return None if left else (end, counts)


def forecast(pool: Sequence[PoolWorker], n_tasks: int, cost_per_task: float, now_ms: int,
             deadline_ms: int | None = None) -> Forecast:
    """The plan for ``n_tasks`` tasks of ``cost_per_task`` each on ``pool``."""
    if n_tasks <= 0:
        return Forecast(now_ms, 0.0, {}, None if deadline_ms is None else now_ms <= deadline_ms)
    if not pool:
        return Forecast(None, 0.0, {}, None if deadline_ms is None else False)
    scale = max(n_tasks / MAX_PLACED, 1.0)  # a huge job: placed in blocks of tasks
    n, cost = math.ceil(n_tasks / scale), cost_per_task * scale
    plan = None
    if deadline_ms is not None:
        plan = _cheapest(pool, n, cost, (deadline_ms - now_ms) / 1000 * (1 - DEADLINE_SLACK))
    end, counts = plan or _fastest(pool, n, cost)
    by_id = {w.worker_id: w for w in pool}
    dollars = sum(k * by_id[wid].s_per_cost * cost * by_id[wid].price / 3600
                  for wid, k in counts.items())
    finish = now_ms + int(end * 1000)
    return Forecast(finish, dollars, {wid: round(k * scale) for wid, k in counts.items()},
                    None if deadline_ms is None else finish <= deadline_ms)


def job_forecast(job: JobStatus, pool: Sequence[PoolWorker], now_ms: int) -> Forecast:
    """The plan for a job's tasks not done yet (pending and running), at its mean cost."""
    costs = [t.cost for t in job.tasks if t.state in ("pending", "leased")] if job.tasks else []
    left = job.pending + job.leased
    mean = sum(costs) / len(costs) if costs else 1.0
    return forecast(pool, left, mean, now_ms, job.deadline_ms)


def workers_needed(pool: Sequence[PoolWorker], n_tasks: int, cost_per_task: float,
                   now_ms: int, deadline_ms: int) -> dict[str, int | None]:
    """Per observed class of worker (backend, speed, price): how many more of it, free now,
    would let the pool finish ``n_tasks`` by the deadline (0: it does already; None: one of
    that class cannot finish a task in time)."""
    within = (deadline_ms - now_ms) / 1000 * (1 - DEADLINE_SLACK)
    have = sum(max(math.floor((within - w.free_in_s) / (w.s_per_cost * cost_per_task) + 1e-9), 0)
               for w in pool)
    short = max(n_tasks - have, 0)
    out: dict[str, int | None] = {}
    for w in sorted(pool, key=lambda w: w.price * w.s_per_cost):
        each = math.floor(within / (w.s_per_cost * cost_per_task) + 1e-9) if within > 0 else 0
        out.setdefault(w.worker_class, 0 if not short else (math.ceil(short / each) if each
                                                            else None))
    return out


def placement_reason(job: JobStatus) -> str:
    """Why the job's tasks go where they go (the claim's rule for it)."""
    if job.deadline_ms is not None and job.behind_ms:
        return "its deadline is out of the live pool's reach: as fast as it can, any worker"
    if job.deadline_ms is not None:
        return "the cheapest workers that still finish it by its deadline"
    if job.budget is not None:
        return "any worker its budget allows (a priced one only while its spend fits)"
    return "the fastest finish (no deadline)"


def terms_json(job: JobStatus, fc: Forecast) -> dict[str, object]:
    """What ``status --json`` and the job page add: the deadline against the prediction,
    and the money (dollars)."""
    return {"deadline_ms": job.deadline_ms, "predicted_finish_ms": fc.finish_ms,
            "on_time": fc.meets, "predicted_cost": round(job.cost + fc.cost, 9),
            "cost_so_far": round(job.cost, 9), "budget": job.budget,
            "behind_ms": job.behind_ms, "budget_held_ms": job.held_ms,
            "placement": placement_reason(job)}
