"""The scheduler's arithmetic, one include at a time, run alone by Redis (scripts.include_source)
without a whole claim: finish_time_grant (the completion-time rule of claim-12's header)
against a model of the rule written here, and fastest_others (who the rule weighs, how fast,
and when each is free) against seeded worker hashes."""

from __future__ import annotations

import json
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nova_queue.scripts import include_source

GRANT = include_source("finish_time_grant") + """
local args = cjson.decode(ARGV[1])
return finish_time_grant(args[1], args[2], tonumber(ARGV[2]), args[3], tonumber(ARGV[3]),
  tonumber(ARGV[4]))
"""


def grant_in_lua(r, task_ms, free_ms, t_w, costs, pending, load_ms):
    return r.eval(GRANT, 0, json.dumps([task_ms, free_ms, costs]), repr(t_w), pending,
                  repr(load_ms))


def grant_model(task_ms, free_ms, t_w, costs, pending, load_ms):
    """The rule: the m-th candidate is granted while the others finish fewer than
    pending - m + 1 tasks strictly before this worker would finish the first m."""
    grant, cumulative = 0, 0.0
    for m, cost in enumerate(costs, start=1):
        cumulative += cost
        finish = load_ms + t_w * cumulative * 1000
        before = 0
        for per_task, free in zip(task_ms, free_ms, strict=True):
            x = (finish - free) / per_task
            if x > 0:
                before += math.ceil(x - 1e-9) - 1
        if before >= pending - m + 1:
            break
        grant = m
    return grant


speeds = st.floats(min_value=0.001, max_value=100.0, allow_nan=False)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(others=st.lists(st.tuples(st.floats(1.0, 1e6), st.floats(0.0, 1e6)), max_size=8),
       t_w=speeds, costs=st.lists(st.floats(0.01, 100.0), min_size=1, max_size=8),
       pending=st.integers(1, 200), load_ms=st.sampled_from([0.0, 1500.0]))
def test_finish_time_grant_is_the_rule(r, others, t_w, costs, pending, load_ms):
    task_ms, free_ms = [o[0] for o in others], [o[1] for o in others]
    got = grant_in_lua(r, task_ms, free_ms, t_w, costs, pending, load_ms)
    assert got == grant_model(task_ms, free_ms, t_w, costs, pending, load_ms)
    assert 0 <= got <= len(costs)


def test_equally_fast_idle_workers_never_wait_on_each_other(r):
    """The fastest idle worker always gets work: ceil(x) - 1, not floor(x), counts what the
    others finish strictly before it."""
    for n in (1, 5, 50):
        assert grant_in_lua(r, [1000.0] * n, [0.0] * n, 1.0, [1.0], 1, 0.0) == 1


def test_more_pending_or_slower_others_never_grant_less(r):
    costs = [1.0, 2.0, 1.0, 4.0]
    grants = [grant_in_lua(r, [900.0, 1200.0], [0.0, 300.0], 1.0, costs, pending, 0.0)
              for pending in (1, 2, 4, 8, 32)]
    assert grants == sorted(grants) and grants[-1] == len(costs) and grants[0] < grants[-1]
    slower = [grant_in_lua(r, [ms, ms], [0.0, 0.0], 1.0, costs, 3, 0.0)
              for ms in (250.0, 500.0, 1000.0, 4000.0)]
    assert slower == sorted(slower)
    # loading the model first counts against this worker
    assert (grant_in_lua(r, [1000.0], [0.0], 1.0, [1.0, 1.0], 2, 5000.0)
            < grant_in_lua(r, [1000.0], [0.0], 1.0, [1.0, 1.0], 2, 0.0))


# -- fastest_others: who is weighed, how fast, and when free ----------------------------------

OTHERS = include_source("fastest_others") + """
local now = tonumber(ARGV[2])
local task_ms, free_ms = fastest_others(KEYS[1], ARGV[1], 'me', tonumber(ARGV[3]), now,
  now - 5000, ARGV[4] ~= '' and ARGV[4] or nil, nil, ARGV[5] ~= '' and ARGV[5] or nil, 'app',
  tonumber(ARGV[6]))
return cjson.encode({ task_ms, free_ms })
"""


def seed_fleet(nova, now, workers):
    """Workers of app 'app': {id: (fleet score s per cost, their hash fields)}."""
    fleet = nova.keys.app_fleet("app")
    for wid, (score, fields) in workers.items():
        nova.redis.zadd(fleet, {wid: score})
        nova.redis.hset(nova.keys.worker(wid), mapping={"id": wid, **fields})
    return fleet


def others_in_lua(nova, now, fleet, cost=1.0, skip="", model="", floor_s=None):
    out = nova.redis.eval(OTHERS, 1, fleet, nova.prefix, now, repr(cost), skip, model,
                          "" if floor_s is None else repr(floor_s))
    task_ms, free_ms = json.loads(out)
    return [] if task_ms == {} else task_ms, [] if free_ms == {} else free_ms


def test_fastest_others_weighs_claiming_workers_at_earned_speed(nova):
    now = nova.server_time_ms()
    fleet = seed_fleet(nova, now, {
        "me": (0.05, {"claim_ms": now, "n:app": 5}),           # the claiming worker: never
        "bench": (0.01, {"claim_ms": now}),                    # fastest by its word alone
        "measured": (0.1, {"claim_ms": now, "n:app": 5, "busy_until_ms": now + 3000}),
        "silent": (0.02, {"n:app": 5}),                        # registered, never claims
        "failing": (0.03, {"claim_ms": now, "n:app": 5, "fail_streak": 2}),
        "skipped": (0.04, {"claim_ms": now, "n:app": 5}),
    })
    task_ms, free_ms = others_in_lua(nova, now, fleet, cost=2.0, skip="skipped")
    # in fleet order: bench, then measured; bench counts no faster than the fastest measured
    # one weighed (failing's 0.03 s: a streak keeps it from work, not from the floor)
    assert task_ms == [0.03 * 2.0 * 1000, 0.1 * 2.0 * 1000]
    assert free_ms == [0, 3000]
    # the claiming worker's own measured estimate floors the unmeasured too
    task_ms, _ = others_in_lua(nova, now, fleet, cost=2.0, skip="skipped", floor_s=0.02)
    assert task_ms == [0.02 * 2.0 * 1000, 0.1 * 2.0 * 1000]


def test_fastest_others_adds_the_load_of_a_model_not_held_warm(nova):
    now = nova.server_time_ms()
    fleet = seed_fleet(nova, now, {
        "warm": (0.1, {"claim_ms": now, "n:app": 5, "warm:app": "m1", "load:app": 9}),
        "cold": (0.2, {"claim_ms": now, "n:app": 5, "warm:app": "m0", "load:app": 2.5}),
    })
    task_ms, free_ms = others_in_lua(nova, now, fleet, model="m1")
    assert task_ms == [100, 200] and free_ms == [0, 2500]
    _, free_ms = others_in_lua(nova, now, fleet)  # a job without a model: no loads
    assert free_ms == [0, 0]
