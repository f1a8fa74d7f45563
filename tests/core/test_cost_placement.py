"""Placement under a deadline and a budget: deadline_grant run alone by Redis
(scripts.include_source) in a simulated pool against the exact least-cost plan, then whole
claims against seeded workers with prices: cheaper workers first, dearer ones only for the
tasks that need them, a job out of the pool's reach as fast as it can (and says so), a
budget that holds a job back from a priced worker (and says so), backups only where the
deadline needs them."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from novatests.seed import set_speed

from nova_queue import TaskSpec
from nova_queue.keys import result_key
from nova_queue.scripts import include_source

GRANT = include_source("deadline_grant") + """
local args = cjson.decode(ARGV[1])
local g = deadline_grant(args[1], args[2], args[3], tonumber(ARGV[2]), tonumber(ARGV[3]),
  args[4], tonumber(ARGV[4]), tonumber(ARGV[5]), 0)
return g == nil and -1 or g
"""


def deadline_grant(r, others, me, costs, pending, deadline_ms):
    """others: [(task_ms, free_ms, price)]; me: (s per cost unit, price). None: behind."""
    got = r.eval(GRANT, 0, json.dumps([[o[0] for o in others] or {}, [o[1] for o in others] or {},
                                       [o[2] for o in others] or {}, costs]),
                 repr(me[0]), repr(me[1]), pending, repr(deadline_ms))
    return None if got == -1 else got


def least_cost(pool, n_tasks, deadline_s):
    """The exact optimum for identical tasks on workers that start free: each worker's
    price per task, cheapest first, filled with what it finishes by the deadline (the
    problem is a knapsack of unit items with capacities: the greedy fill is exact).
    None when the pool cannot finish them in time."""
    left, total = n_tasks, 0.0
    for task_s, price in sorted(pool, key=lambda w: w[0] * w[1]):
        n = min(left, math.floor(deadline_s / task_s + 1e-9))
        total, left = total + n * task_s * price / 3600, left - n
    return None if left else total


def simulate(r, pool, n_tasks, deadline_s):
    """Each worker claims one task whenever it is free (deadline_grant decides; a worker
    told to wait asks again when another one frees up); tasks take exactly the time
    predicted. Returns (makespan s, dollars)."""
    free = [0.0] * len(pool)
    asks = [0.0] * len(pool)  # when each worker asks next
    left, spent, finish = n_tasks, 0.0, 0.0
    for _ in range(20 * n_tasks + 50):
        if not left:
            break
        i = min(range(len(pool)), key=lambda k: (asks[k], k))
        now = asks[i]
        others = [(pool[k][0] * 1000, max(free[k] - now, 0.0) * 1000, pool[k][1])
                  for k in range(len(pool)) if k != i]
        g = deadline_grant(r, others, pool[i], [1.0], left, (deadline_s - now) * 1000)
        if g is None or g > 0:  # granted (None: as fast as it can, as the caller does)
            free[i] = now + pool[i][0]
            spent, finish, left = spent + pool[i][0] * pool[i][1] / 3600, max(finish, free[i]), left - 1
            asks[i] = free[i]
        else:
            later = [f for k, f in enumerate(free) if k != i and f > now]
            asks[i] = min(later) if later else math.inf
    assert left == 0, "the simulated pool stalled"
    return finish, spent


workers = st.lists(st.tuples(st.sampled_from([1.0, 2.0, 3.0, 5.0, 8.0]),
                             st.sampled_from([0.0, 0.2, 1.0, 4.0])), min_size=1, max_size=6)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pool=workers, n_tasks=st.integers(1, 30), deadline_s=st.integers(1, 40))
def test_never_misses_a_deadline_and_never_pays_more_than_the_cheapest_plan(r, pool, n_tasks,
                                                                             deadline_s):
    optimum = least_cost(pool, n_tasks, deadline_s)
    makespan, spent = simulate(r, pool, n_tasks, deadline_s)
    if optimum is not None:  # the pool can make it: it does, at the least cost
        assert makespan <= deadline_s + 1e-9
        assert spent <= optimum + 1e-9
    else:  # it cannot: every task still runs
        assert makespan > 0


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(others=st.lists(st.tuples(st.floats(1.0, 1e5), st.floats(0.0, 1e5), st.floats(0, 10)),
                       max_size=6),
       t_w=st.floats(0.001, 100.0), price=st.floats(0, 10), k=st.integers(1, 8),
       pending=st.integers(1, 100), deadline_ms=st.floats(1.0, 1e6))
def test_each_grant_is_needed_and_in_time(r, others, t_w, price, k, pending, deadline_ms):
    pending = max(pending, k)
    g = deadline_grant(r, others, (t_w, price), [1.0] * k, pending, deadline_ms)
    cap = [max(math.floor((deadline_ms - free) / task + 1e-9), 0) for task, free, _ in others]
    mine = max(math.floor(deadline_ms / (t_w * 1000) + 1e-9), 0)
    if g is None:
        assert sum(cap) + mine < pending  # out of the pool's reach
        return
    my_task = t_w * 1000
    cheaper = sum(c for c, (task, _, p) in zip(cap, others)
                  if p * task < price * my_task or (p * task == price * my_task and task < my_task))
    assert 0 <= g <= k
    if g:
        assert g * my_task <= deadline_ms  # it finishes what it takes in time
        assert cheaper < pending - g + 1  # and cheaper workers could not have
    if g < k:
        assert (g + 1) * my_task > deadline_ms or cheaper >= pending - g


# -- whole claims ------------------------------------------------------------------------------

def priced(nova, wid, s_per_cost, price):
    nova.register_worker(wid, {"name": wid, "price": price}, ["synthetic"])
    set_speed(nova, wid, "synthetic", s_per_cost)


def test_cheap_workers_first_and_the_dear_one_only_when_needed(nova):
    priced(nova, "dear", 1.0, 4.0)
    priced(nova, "cheap", 4.0, 0.2)
    easy = nova.enqueue("synthetic", [TaskSpec(f"t{i}") for i in range(5)], deadline="10m")
    assert nova.claim("dear", "synthetic").status == "wait"
    assert len(nova.claim("cheap", "synthetic", k=5).leases) == 5
    nova.cancel(easy)
    assert nova.job(easy, with_tasks=False).spent == pytest.approx(5 * 4.0 * 0.2 / 3600)


def test_the_dear_worker_takes_what_the_cheap_ones_cannot_finish_in_time(nova):
    priced(nova, "dear", 1.0, 4.0)
    priced(nova, "cheap", 4.0, 0.2)
    # 12 tasks by 31 s: the cheap one does 7 (28 s of the 29.45 the plan counts on, 5 % kept
    # in hand), the dear one the other 5
    tight = nova.enqueue("synthetic", [TaskSpec(f"u{i}") for i in range(12)], deadline="31s")
    assert len(nova.claim("dear", "synthetic", k=12).leases) == 5
    assert nova.job(tight, with_tasks=False).spent == pytest.approx(5 * 4.0 / 3600)
    assert not [e for e in nova.events(count=1000) if e.type == "deadline_behind"]


def test_a_job_out_of_reach_runs_as_fast_as_it_can_and_says_so(nova):
    priced(nova, "dear", 1.0, 4.0)
    priced(nova, "cheap", 4.0, 0.2)
    job = nova.enqueue("synthetic", [TaskSpec(f"t{i}") for i in range(40)], deadline="10s")
    assert nova.claim("dear", "synthetic").leases  # dear and all: no plan meets it
    assert nova.claim("cheap", "synthetic").leases
    behind = [e for e in nova.events(count=1000) if e.type == "deadline_behind"]
    assert [e.fields["job"] for e in behind] == [job]  # once
    assert nova.redis.hget(nova.keys.job(job), "behind_ms")


def test_a_budget_holds_a_job_back_from_a_priced_worker(nova):
    priced(nova, "dear", 1.0, 36.0)  # a cent per task
    priced(nova, "free", 1.0, 0.0)
    job = nova.enqueue("synthetic", [TaskSpec(f"t{i}") for i in range(10)], budget=0.025)
    assert len(nova.claim("dear", "synthetic", k=10).leases) == 2  # 2 cents of 2.5
    assert nova.claim("dear", "synthetic").status == "wait"  # a third would pass it
    held = [e for e in nova.events(count=1000) if e.type == "budget_held"]
    assert [(e.fields["job"], e.fields["worker"]) for e in held] == [(job, "dear")]
    assert len(nova.claim("free", "synthetic", k=10).leases) == 8  # free capacity runs it
    assert nova.job(job, with_tasks=False).spent <= 0.025


def test_no_backup_of_a_task_that_meets_its_deadline(nova):
    priced(nova, "dear", 1.0, 4.0)  # $4 per hour of tasks; the cheap one $2
    priced(nova, "cheap", 10.0, 0.2)
    nova.enqueue("synthetic", [TaskSpec("slow")], deadline="10m")
    [lease] = nova.claim("cheap", "synthetic").leases
    assert nova.claim("dear", "synthetic").leases == []  # the cheap one makes it: no backup
    nova.redis.hset(nova.keys.job(lease.job_id), "deadline_ms", nova.server_time_ms() + 2000)
    [backup] = nova.claim("dear", "synthetic").leases  # now it would be late: a backup
    assert backup.backup and backup.task_id == lease.task_id


def test_commits_charge_their_jobs_at_the_workers_price(nova):
    priced(nova, "dear", 1.0, 36.0)
    job = nova.enqueue("synthetic", [TaskSpec(f"t{i}") for i in range(3)])
    leases = nova.claim("dear", "synthetic", k=3).leases
    for lease, run_s in zip(leases, (1.0, 2.0, 0.5)):
        key = result_key(lease.job_id, lease.index, lease.lease_gen, lease.attempt_id, "png")
        nova.complete("dear", lease, key, run_s=run_s, warm=True)
    assert nova.job(job, with_tasks=False).cost == pytest.approx(3.5 * 36.0 / 3600)
