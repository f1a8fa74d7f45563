"""``nova-queue plan`` and the ``/metrics`` gauges autoscalers read: per app and job with a
deadline, the predicted finish with the live pool, the workers of each class that would meet
it, and the idle priced workers that could leave."""

from __future__ import annotations

import json

from novatests.cli import ok
from novatests.seed import set_speed

from nova_queue import TaskSpec


def priced(nova, wid, s_per_cost, price, backend="cpu"):
    nova.register_worker(wid, {"name": wid, "price": price, "backend": backend}, ["synthetic"])
    set_speed(nova, wid, "synthetic", s_per_cost)


def test_plan_says_what_a_late_job_needs(invoke, nova):
    priced(nova, "cheap", 100.0, 0.2)
    priced(nova, "dear", 10.0, 4.0, backend="cuda")
    # 40 tasks of 10 s on the dear one, 100 s on the cheap one, due in 205 s: the pool does
    # 19 + 1 by then (194.75 s: the plan keeps 5 % in hand; seconds to spare for a slow
    # machine); 20 more take 2 more dear ones, or 20 cheap ones
    job = nova.enqueue("synthetic", [TaskSpec(f"t{i}") for i in range(40)], deadline="205s")
    report = json.loads(ok(invoke("plan", "--json")).stdout)
    (row,) = report["apps"]["synthetic"]["jobs"]
    assert row["job_id"] == job and row["on_time"] is False and row["slack_s"] < 0
    assert row["workers_needed"] == {"cuda/10s/$4h": 2, "cpu/100s/$0.2h": 20}
    assert report["apps"]["synthetic"]["workers"] == {"cuda/10s/$4h": 1, "cpu/100s/$0.2h": 1}
    text = ok(invoke("plan")).stdout
    assert "LATE" in text and "+2 cuda/10s/$4h" in text


def test_plan_lets_idle_dear_workers_leave_when_cheap_ones_make_it(invoke, nova):
    priced(nova, "cheap", 1.0, 0.2)
    priced(nova, "dear", 0.5, 4.0, backend="cuda")
    nova.enqueue("synthetic", [TaskSpec(f"t{i}") for i in range(5)], deadline="1h")
    p = json.loads(ok(invoke("plan", "--json")).stdout)["apps"]["synthetic"]
    assert p["jobs"][0]["on_time"] is True
    assert set(p["jobs"][0]["workers_needed"].values()) == {0}
    assert [w["worker"] for w in p["can_leave"]] == ["dear"]
    assert "idle, could leave: dear" in ok(invoke("plan")).stdout
    nova.enqueue("synthetic", [TaskSpec("open-ended")])  # takes every worker: none leaves
    assert json.loads(ok(invoke("plan", "--json")).stdout)["apps"]["synthetic"]["can_leave"] == []


def test_plan_without_deadlines_lists_the_pool_only(invoke, nova):
    priced(nova, "w", 1.0, 0.0)
    p = json.loads(ok(invoke("plan", "--json")).stdout)["apps"]["synthetic"]
    assert (p["jobs"], p["can_leave"]) == ([], [])
