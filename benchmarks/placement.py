"""Placement: fair share between owners, warm models first, and what a claim costs Redis
with many workers, jobs and owners. Real redis-server; real worker processes for the
first two.

- ``fair``: 3 synthetic workers; owner A queues 10x the work of B and C (equal shares).
  While all three have pending work, each owner's worker-seconds (from the commits'
  ``run_s``) over all of them; target within ±10 % of 1/3 each. A fourth owner's 20-task
  job arrives in the middle: how soon its first task starts (target: within one task
  time) and how long it takes against its fair share (3 workers / 4 owners).
- ``warm``: 4 txt2img workers and two jobs of two different tiny random-weight models
  (``nova-queue make-model``: their load time is real) submitted together; model loads
  (target <= workers x models) and the makespan against each worker sticking to one model
  (two workers labelled per model, the jobs requiring them), side by side.
- ``cost``: Redis time per claim (``INFO commandstats``) with 100 workers, 50 jobs and 10
  owners (the fair-share path; target <= 200 us), and the 100-worker policy scan of a slow
  worker facing a short queue, for comparison.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from pathlib import Path
from typing import Any

from benchlib import log, median
from fleet import Proc, start_nova_worker, stop_all
from throughput import evalsha_stats, redis_cost, redis_cpu_s

from nova_queue import NovaClient, TaskSpec, shares
from nova_queue.local import RedisServer, wait_for

TASK_S = 0.3


def _client(server: RedisServer, ns: str) -> NovaClient:
    return NovaClient.from_url(server.url, namespace=ns, lease_ttl_s=3.0,
                               heartbeat_interval_s=0.6)


def _events(client: NovaClient) -> list[Any]:
    out, after = [], "0-0"
    while batch := client.events(after, count=5000):
        out += batch
        after = batch[-1].id
    return out


def fair_share(server: RedisServer, folder: Path, quick: bool) -> dict[str, Any]:
    """Three owners, one 10x backlogged; a late fourth with 20 tasks."""
    ns = f"fair-{uuid.uuid4().hex[:6]}"
    client = _client(server, ns)
    small = 12 if quick else 40
    params = {"seconds": TASK_S, "size": 64}
    procs = [start_nova_worker(server.url, ns, f"file://{folder}/store-{ns}", folder / ns,
                               f"w{i}", 1.0, lease_ttl_s=3.0, heartbeat_s=0.6,
                               extra=("--no-benchmark",)) for i in range(3)]
    try:
        wait_for(lambda: len(client.eligible_workers("synthetic")) == 3, 180, 0.05, "workers")
        jobs = {owner: client.enqueue("synthetic", [TaskSpec(f"{owner} {i}", TASK_S)
                                                    for i in range(n)], params=params,
                                      owner=owner)
                for owner, n in (("alice", 10 * small), ("bob", small), ("carol", small))}
        job_owner = {j: o for o, j in jobs.items()}
        wait_for(lambda: client.job(jobs["bob"], with_tasks=False).done >= small // 2, 600, 0.05,
                 "half of bob's job")
        late_at = client.server_time_ms()
        jobs["dave"] = client.enqueue("synthetic", [TaskSpec(f"dave {i}", TASK_S)
                                                    for i in range(20)], params=params,
                                      owner="dave")
        job_owner[jobs["dave"]] = "dave"
        wait_for(lambda: all(client.job(jobs[o], with_tasks=False).finished
                             for o in ("bob", "carol", "dave")), 900, 0.1, "the small jobs")
    finally:
        stop_all(procs)
    return _fair_result(_events(client), jobs, job_owner, late_at)


def _fair_result(events: list[Any], jobs: dict[str, str], job_owner: dict[str, str],
                 late_at: int) -> dict[str, Any]:
    done_ms = {j: max(e.ts_ms for e in events if e.type == "completed" and e.fields["job"] == j)
               for o, j in jobs.items() if o != "alice"}
    window_end = min(done_ms[jobs["bob"]], done_ms[jobs["carol"]], late_at)
    used: dict[str, float] = {o: 0.0 for o in ("alice", "bob", "carol")}
    for e in events:
        if e.type == "completed" and e.ts_ms <= window_end:
            owner = job_owner[e.fields["job"]]
            if owner in used:
                used[owner] += float(e.fields["run_s"])
    total = sum(used.values()) or 1.0
    dave = jobs["dave"]
    first = min(e.ts_ms for e in events if e.type == "claimed" and e.fields["job"] == dave)
    return {"fractions": {o: u / total for o, u in used.items()},
            "max_deviation": max(abs(u / total - 1 / 3) * 3 for u in used.values()),
            "late_start_s": (first - late_at) / 1000, "task_s": TASK_S,
            "late_finish_s": (done_ms[dave] - late_at) / 1000,
            "late_fair_finish_s": 20 * TASK_S / (3 / 4)}


def seed_usage(client: NovaClient, n_owners: int) -> None:
    """Owners ``owner0..`` with recent usage 10, 20, ... worker-seconds."""
    phi = client.server_time_ms() / (shares.DEFAULT_HALF_LIFE_S * 1000)  # note_usage.lua
    client.redis.hset(client.keys.usage(), mapping={
        f"f:owner{o}": repr(phi + math.log2(10.0 * (o + 1))) for o in range(n_owners)})


def claim_cost(server: RedisServer, n_workers: int = 100, n_jobs: int = 50, n_owners: int = 10,
               n_calls: int = 2000) -> dict[str, Any]:
    """Redis time per claim on the fair-share path: ``n_workers`` workers with measured
    speeds, ``n_jobs`` jobs of ``n_owners`` owners with some usage each, deep queues."""
    ns = f"cost-{uuid.uuid4().hex[:6]}"
    client = NovaClient.from_url(server.url, namespace=ns)
    r = client.redis
    for i in range(n_workers):
        client.register_worker(f"w{i}", {"name": f"w{i}"}, ["synthetic"])
        r.hset(client.keys.worker(f"w{i}"), mapping={"ema:synthetic": 0.1, "n:synthetic": 5})
        r.zadd(client.keys.app_fleet("synthetic"), {f"w{i}": 0.1})
    per_job = max(2 * n_calls // n_jobs, 2)
    for j in range(n_jobs):
        client.enqueue("synthetic", [TaskSpec(f"t{i}", 1.0) for i in range(per_job)],
                       owner=f"owner{j % n_owners}")
    seed_usage(client, n_owners)
    r.config_resetstat()
    cpu0 = redis_cpu_s(r)
    claimed = sum(len(client.claim(f"w{i % n_workers}", "synthetic").leases)
                  for i in range(n_calls))
    st = evalsha_stats(r)
    out = {"usec_per_call": st["usec"] / st["calls"],
           "cpu_us_per_call": (redis_cpu_s(r) - cpu0) / st["calls"] * 1e6,
           "calls": st["calls"], "claimed": claimed}
    r.delete(*r.keys(f"{client.prefix}*"))
    client.close()
    return {"workers": n_workers, "jobs": n_jobs, "owners": n_owners, "fair_claim": out}


def warm_models(server: RedisServer, folder: Path, quick: bool) -> dict[str, Any]:
    """Two jobs of two models on 4 txt2img workers: free placement vs sticky workers."""
    from nova_queue.workers.apps.txt2img_model import make_model

    models = [make_model(folder / f"model-{m}", seed=i) for i, m in enumerate("ab")]
    n = 12 if quick else 32
    runs = {}
    for mode in ("free", "sticky"):
        runs[mode] = _warm_run(server, folder, models, n, sticky=mode == "sticky")
        log(f"  warm models, {mode}: makespan {runs[mode]['makespan_s']:.2f} s, "
            f"{runs[mode]['model_loads']} model loads")
    return {"runs": runs, "workers": 4, "models": 2, "tasks_per_job": n,
            "makespan_over_sticky": runs["free"]["makespan_s"] / runs["sticky"]["makespan_s"],
            "model_loads": runs["free"]["model_loads"]}


def _warm_run(server: RedisServer, folder: Path, models: list[Path], n: int, *,
              sticky: bool) -> dict[str, Any]:
    ns = f"warm-{'sticky' if sticky else 'free'}-{uuid.uuid4().hex[:6]}"
    client = _client(server, ns)
    procs: list[Proc] = []
    try:
        for i in range(4):
            extra = ["--no-benchmark", "--backend", "cpu"]
            if sticky:
                extra += ["--label", f"model={'ab'[i % 2]}"]
            procs.append(start_nova_worker(
                server.url, ns, f"file://{folder}/store-{ns}", folder / ns, f"w{i}", 1.0,
                lease_ttl_s=10.0, heartbeat_s=2.0, extra=tuple(extra), app="txt2img",
                env={"NOVA_MODEL_ROOTS": str(folder), "HF_HUB_OFFLINE": "1"}))
        wait_for(lambda: len(client.eligible_workers("txt2img")) == 4, 600, 0.1, "4 workers")
        t0 = time.time()
        jobs = [client.enqueue("txt2img", [TaskSpec(f"{m.name} {i}", 1.0) for i in range(n)],
                               params={"model": str(m), "width": 64, "height": 64, "steps": 1,
                                       "batch": 1},
                               model=str(m), requires=[f"model={'ab'[k]}"] if sticky else ())
                for k, m in enumerate(models)]
        wait_for(lambda: all(client.job(j, with_tasks=False).finished for j in jobs), 900, 0.1,
                 "both jobs")
        end = max(client.job(j, with_tasks=False).finished_ms for j in jobs) / 1000
    finally:
        stop_all(procs)
    loads = sum(1 for e in _events(client) if e.type == "model_loaded")
    client.close()
    return {"makespan_s": end - t0, "model_loads": loads}


def run_section(server: RedisServer, folder: Path, *, quick: bool,
                repeats: int | None = None) -> dict[str, Any]:
    """Fair share, warm models (when torch and diffusers are installed) and claim cost."""
    import importlib.util

    out: dict[str, Any] = {}
    log("placement: fair share (3 owners, one 10x backlogged, a fourth arrives)")
    out["fair"] = fair_share(server, folder, quick)
    log(f"  fractions {json.dumps({k: round(v, 3) for k, v in out['fair']['fractions'].items()})}"
        f", late job starts in {out['fair']['late_start_s']:.2f} s")
    if importlib.util.find_spec("torch") and importlib.util.find_spec("diffusers"):
        log("placement: warm models (4 txt2img workers, 2 tiny models)")
        out["warm"] = warm_models(server, folder, quick)
    else:
        out["warm"] = None
        log("placement: warm models skipped (torch and diffusers are not installed)")
    # side by side in each repeat: the fair-share claim, the one-owner deep-queue claim and
    # the policy scan, all with 100 workers (a busy machine moves all three together)
    costs = []
    for _ in range(repeats or (1 if quick else 3)):
        c = claim_cost(server, n_calls=500 if quick else 2000)
        base = redis_cost(server, 100, 500 if quick else 2000)
        c["plain_claim"], c["policy_scan"] = base["claim"], base["claim_wait"]
        costs.append(c)
    out["cost"] = costs[-1]
    out["fair_claim_us"] = median([c["fair_claim"]["usec_per_call"] for c in costs])
    out["plain_claim_us"] = median([c["plain_claim"]["usec_per_call"] for c in costs])
    out["policy_scan_us"] = median([c["policy_scan"]["usec_per_call"] for c in costs])
    out["fair_over_plain"] = median([c["fair_claim"]["usec_per_call"]
                                     / c["plain_claim"]["usec_per_call"] for c in costs])
    out["fair_over_scan"] = median([c["fair_claim"]["usec_per_call"]
                                    / c["policy_scan"]["usec_per_call"] for c in costs])
    log(f"placement: claim with 100 workers, 50 jobs, 10 owners: {out['fair_claim_us']:.0f} us"
        f" (one owner {out['plain_claim_us']:.0f} us, policy scan {out['policy_scan_us']:.0f}"
        f" us; fair / one owner {out['fair_over_plain']:.2f})")
    return out
