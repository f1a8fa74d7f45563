"""The exact optimal makespan T* of a fleet, and the static-split model. Pure functions.

A fleet is described per worker by its startup ``c_i`` (seconds from the common start
instant until it can take work), its per-task time ``t_i`` (seconds) and, optionally, the
instant ``e_i`` it stops (killed: only tasks it finishes by then count). With N identical
tasks, no scheduler can finish before

    T* = min { T : sum_i min(floor((T - c_i)+ / t_i), cap_i) >= N },
    cap_i = floor((e_i - c_i) / t_i)

and T* is exactly the N-th smallest of the instants ``c_i + k * t_i`` (k = 1 .. cap_i): the
count on the left is the number of those instants <= T.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

#: Slack for floating-point noise when a task ends exactly at a worker's stop instant.
EPS_S = 1e-9


def optimal_makespan(starts_s: Sequence[float], per_task_s: Sequence[float], n_tasks: int,
                     ends_s: Sequence[float] | None = None) -> float:
    """T*: the earliest instant by which ``n_tasks`` tasks can be done; ``inf`` if never."""
    if len(starts_s) != len(per_task_s) or (ends_s is not None and len(ends_s) != len(starts_s)):
        raise ValueError("starts, per-task times and ends must have one entry per worker")
    if n_tasks <= 0:
        return 0.0
    heap: list[tuple[float, int, int]] = []  # (finish instant of its k-th task, worker, k)
    caps: list[float] = []
    for i, (c, t) in enumerate(zip(starts_s, per_task_s)):
        end = math.inf if ends_s is None else ends_s[i]
        usable = math.isfinite(c) and math.isfinite(t) and t > 0
        cap = (math.floor((end - max(c, 0.0)) / t + EPS_S) if usable and math.isfinite(end)
               else math.inf)
        caps.append(cap if usable else 0)
        if usable and cap >= 1:
            heap.append((max(c, 0.0) + t, i, 1))
    heapq.heapify(heap)
    done = 0
    while heap:
        instant, i, k = heapq.heappop(heap)
        done += 1
        if done == n_tasks:
            return instant
        if k + 1 <= caps[i]:
            heapq.heappush(heap, (max(starts_s[i], 0.0) + (k + 1) * per_task_s[i], i, k + 1))
    return math.inf


def tasks_done_by(instant_s: float, starts_s: Sequence[float], per_task_s: Sequence[float],
                  ends_s: Sequence[float] | None = None) -> int:
    """sum_i min(floor((T - c_i)+ / t_i), cap_i): tasks a perfect fleet did by ``instant_s``."""
    total = 0
    for i, (c, t) in enumerate(zip(starts_s, per_task_s)):
        if not (math.isfinite(c) and math.isfinite(t) and t > 0):
            continue
        c = max(c, 0.0)
        end = math.inf if ends_s is None else ends_s[i]
        n = math.floor(max(instant_s - c, 0.0) / t + EPS_S)
        if math.isfinite(end):
            n = min(n, math.floor(max(end - c, 0.0) / t + EPS_S))
        total += n
    return total


def static_split_makespan(starts_s: Sequence[float],
                          task_times_s: Sequence[Sequence[float]]) -> float:
    """Makespan when worker i runs exactly the tasks ``task_times_s[i]`` back to back."""
    return max((max(c, 0.0) + sum(times) for c, times in zip(starts_s, task_times_s) if times),
               default=0.0)


def least_cost(starts_s: Sequence[float], per_task_s: Sequence[float],
               prices_per_h: Sequence[float], n_tasks: int, deadline_s: float) -> float:
    """The least cost (dollars) of finishing ``n_tasks`` identical tasks by ``deadline_s``:
    worker i (ready at ``c_i``, ``t_i`` per task, ``p_i`` dollars per hour) can finish
    cap_i = floor((D - c_i)+ / t_i) of them, each costing p_i * t_i / 3600. Minimising
    sum n_i * cost_i subject to sum n_i = N, 0 <= n_i <= cap_i is a knapsack of unit items,
    which the greedy fill (the cheapest per task first, each up to its cap) solves exactly.
    ``inf`` when the caps add up to fewer than N."""
    left, total = n_tasks, 0.0
    order = sorted(range(len(per_task_s)), key=lambda i: (prices_per_h[i] * per_task_s[i],
                                                          per_task_s[i]))
    for i in order:
        c, t = max(starts_s[i], 0.0), per_task_s[i]
        if left <= 0 or not (math.isfinite(c) and math.isfinite(t) and t > 0):
            continue
        k = min(left, math.floor(max(deadline_s - c, 0.0) / t + EPS_S))
        total, left = total + k * t * prices_per_h[i] / 3600, left - k
    return math.inf if left > 0 else total
