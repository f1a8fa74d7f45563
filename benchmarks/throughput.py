"""Lifecycle throughput: no-op tasks claimed and committed per second, against RQ
SimpleWorker jobs per second on the same Redis; and Redis CPU per claim and per commit.

nova-queue: P processes, each a registered worker looping through ``NovaClient`` as a
worker does around no-op tasks, minus the app and the upload: ``claim(k=64)`` then
``complete_batch`` of the leases with the next claim of 64 in the same call (what the worker
claims for tasks far cheaper than a round trip); and, side by side, the one-task-per-call loop
of before (``complete_and_claim`` at k=1, ``nova_k1_*``).
RQ: P ``SimpleWorker`` processes on a queue of no-op jobs (RQ's full job lifecycle).
BullMQ (when ``node`` and ``npm`` are on PATH, ``bullmq.py``): P processes, each one Worker
with concurrency 1 or 100, on no-op jobs added with addBulk beforehand.
Rates are tasks / (last commit − first claim), process start-up excluded.
"""

from __future__ import annotations

import multiprocessing as mp
import time
import uuid
from pathlib import Path
from typing import Any

import bullmq
import worker_throughput
from benchlib import evalsha_stats, log, median, per_task_scripts, redis_cpu_s, script_stats
from fleet import start_pull_worker, stop_all

from nova_queue import NovaClient, TaskSpec
from nova_queue.client import BatchCommit
from nova_queue.keys import result_key
from nova_queue.local import RedisServer, wait_for

APP = "noop"
#: tasks per claim and per batched commit in the nova loop (the worker's cheap_k for no-ops)
BATCH_K = 64
LONG_TTL_S = 600.0  # no heartbeats run here: leases and registrations must not expire


def _client(url: str, ns: str) -> NovaClient:
    return NovaClient.from_url(url, namespace=ns, lease_ttl_s=LONG_TTL_S, heartbeat_interval_s=60)


def _register(client: NovaClient, worker_id: str, bench_s: float = 0.001) -> None:
    client.register_worker(worker_id, {"name": worker_id}, [APP], {APP: {"bench_s": bench_s}})


def _nova_loop(url: str, ns: str, worker_id: str, barrier: Any, out: Any) -> None:
    client = _client(url, ns)
    _register(client, worker_id)
    barrier.wait()
    first, n = time.time(), 0
    res = client.claim(worker_id, APP, 1)
    while True:
        if res.status != "ok":
            if res.status == "empty" or client.pending_count(APP) == 0:
                break
            res = client.claim(worker_id, APP, 1)
            continue
        (lease,) = res.leases
        n += 1
        # as the worker does: the commit claims the next task in the same call
        _, nxt = client.complete_and_claim(worker_id, lease, _key(lease), run_s=0.0, warm=True)
        res = nxt if nxt is not None else client.claim(worker_id, APP, 1)
    out.put((first, time.time(), n))


def _nova_batch_loop(url: str, ns: str, worker_id: str, barrier: Any, out: Any) -> None:
    client = _client(url, ns)
    _register(client, worker_id)
    barrier.wait()
    first, n = time.time(), 0
    res = client.claim(worker_id, APP, BATCH_K)
    while True:
        if res is None or res.status != "ok":
            if (res is not None and res.status == "empty") or client.pending_count(APP) == 0:
                break
            res = client.claim(worker_id, APP, BATCH_K)
            continue
        n += len(res.leases)
        # as the worker does for cheap tasks: one call commits them all and claims the next
        res = client.complete_batch(
            worker_id, [BatchCommit(x, _key(x), 0.0, True) for x in res.leases], app=APP,
            k=BATCH_K).claimed
    out.put((first, time.time(), n))


def _key(lease: Any) -> str:
    """The result key a commit of ``lease`` names (``complete`` accepts no other)."""
    return result_key(lease.job_id, lease.index, lease.lease_gen, lease.attempt_id, "png")


def nova_rate(server: RedisServer, processes: int, n_tasks: int,
              batched: bool = True) -> dict[str, float]:
    """Claim → commit per second with ``processes`` worker processes (``batched``: k=64
    claims and batched commits, else one task per call)."""
    ns = f"tp-{processes}-{uuid.uuid4().hex[:6]}"
    client = _client(server.url, ns)
    client.enqueue(APP, [TaskSpec(f"noop {i}", 1.0) for i in range(n_tasks)])
    ctx = mp.get_context("fork")
    barrier, out = ctx.Barrier(processes + 1), ctx.Queue()
    loop = _nova_batch_loop if batched else _nova_loop
    procs = [ctx.Process(target=loop, args=(server.url, ns, f"tp{i}", barrier, out))
             for i in range(processes)]
    for p in procs:
        p.start()
    r = server.client()
    r.config_resetstat()
    cpu0 = redis_cpu_s(r)
    barrier.wait(timeout=120)
    results = [out.get(timeout=600) for _ in procs]
    cpu1 = redis_cpu_s(r)
    scripts = script_stats(r)
    r.close()
    for p in procs:
        p.join(30)
    done = sum(r[2] for r in results)
    span = max(r[1] for r in results) - min(r[0] for r in results)
    if done != n_tasks:
        raise RuntimeError(f"nova throughput: {done} of {n_tasks} tasks committed")
    client.redis.delete(*client.redis.keys(f"{client.prefix}*"))
    client.close()
    return {"processes": processes, "tasks": done, "seconds": span, "tasks_per_s": done / span,
            "redis_cpu_us_per_task": (cpu1 - cpu0) / done * 1e6,
            **per_task_scripts(scripts, done)}


def rq_rate(server: RedisServer, processes: int, n_jobs: int, folder: Path) -> dict[str, float]:
    """RQ SimpleWorker no-op jobs per second with ``processes`` worker processes."""
    from rq import Queue, Worker
    from rq.job import Job

    r = server.client(decode=False)
    tag = f"tp{processes}{uuid.uuid4().hex[:6]}"
    q = Queue(tag, connection=r)
    procs = [start_pull_worker(server.url, folder / tag, f"rq{i}", 1.0, store_url="",
                               ready_key=f"bench:{tag}:ready", rq_queue=tag, startup=False)
             for i in range(processes)]
    try:
        wait_for(lambda: Worker.count(queue=q) >= processes, 120, 0.05, "RQ workers to register")
        datas = [Queue.prepare_data("rq_jobs.noop", job_id=f"{tag}-{i}", result_ttl=3600)
                 for i in range(n_jobs)]
        cpu0 = redis_cpu_s(r)
        for lo in range(0, n_jobs, 1000):
            with r.pipeline() as pipe:
                q.enqueue_many(datas[lo:lo + 1000], pipeline=pipe)
                pipe.execute()
        wait_for(lambda: q.finished_job_registry.count >= n_jobs, 600, 0.05, "RQ no-op jobs")
        cpu1 = redis_cpu_s(r)
    finally:
        stop_all(procs)
    jobs = Job.fetch_many([d.job_id for d in datas], connection=r)
    first = min(j.started_at for j in jobs)
    last = max(j.ended_at for j in jobs)
    span = (last - first).total_seconds()
    r.close()
    return {"processes": processes, "tasks": n_jobs, "seconds": span,
            "tasks_per_s": n_jobs / span,
            # RQ's CPU includes its enqueue (a pipeline): an upper bound for the worker side
            "redis_cpu_us_per_task": (cpu1 - cpu0) / n_jobs * 1e6}


def redis_cost(server: RedisServer, fleet_size: int, n_calls: int) -> dict[str, float]:
    """Redis time per claim, per commit and per commit-and-claim (``INFO commandstats``:
    EVALSHA usec per call, the script and every command it runs) with ``fleet_size``
    registered workers. ``claim`` with a deep queue (fast path); ``commit_claim`` is the
    worker's one call per task (complete_claim-15); ``claim_wait`` by a slow worker facing
    a short queue, which scans every worker's predicted free time and answers WAIT."""
    ns = f"cost-{fleet_size}-{uuid.uuid4().hex[:6]}"
    client = _client(server.url, ns)
    r = client.redis
    for i in range(fleet_size):
        _register(client, f"w{i}")
    # deep enough that every measured claim takes the fast path (R > fleet size)
    depth = 2 * n_calls + 2 * fleet_size + 2
    client.enqueue(APP, [TaskSpec(f"noop {i}", 1.0) for i in range(depth)])
    lease = client.claim("w0", APP).leases[0]  # one warm run: w0 has a measured speed
    client.complete("w0", lease, _key(lease), run_s=0.001, warm=True)

    def phase(fn: Any) -> dict[str, float]:
        r.config_resetstat()
        cpu0 = redis_cpu_s(r)
        out = fn()
        st = evalsha_stats(r)
        return {"usec_per_call": st["usec"] / st["calls"],
                "cpu_us_per_call": (redis_cpu_s(r) - cpu0) / st["calls"] * 1e6,
                "calls": st["calls"], "result": out}

    claim = phase(lambda: [client.claim("w0", APP).leases[0] for _ in range(n_calls)])
    leases = claim.pop("result")
    commit = phase(lambda: [client.complete("w0", x, _key(x), run_s=0.001, warm=True)
                            for x in leases])
    commit.pop("result")
    lease = client.claim("w0", APP).leases[0]

    def commit_and_claim() -> None:
        nonlocal lease
        for _ in range(n_calls):
            _, nxt = client.complete_and_claim("w0", lease, _key(lease), run_s=0.001, warm=True)
            lease = nxt.leases[0]

    both = phase(commit_and_claim)
    both.pop("result")
    # w0's last lease ends here: left running, it would be overdue (on a busy machine) by the
    # time the slow worker claims below, and the slow worker would take a backup of it
    client.complete("w0", lease, _key(lease), run_s=0.001, warm=True)
    # the policy path: a slow worker (1 s per unit, measured) and 2 tasks left
    _register(client, "slow", bench_s=1.0)
    # seed a measured speed (as after one warm 1 s run): no claim would grant it a task
    r.hset(client.keys.worker("slow"), mapping={f"ema:{APP}": "1", f"n:{APP}": "1"})
    client.enqueue(APP, [TaskSpec("noop a", 1.0), TaskSpec("noop b", 1.0)])
    statuses: list[str] = []
    wait = phase(lambda: statuses.extend(client.claim("slow", APP).status
                                         for _ in range(min(n_calls, 2000))))
    wait.pop("result")
    if set(statuses) != {"wait"}:
        raise RuntimeError(f"policy-path claims answered {set(statuses)}, expected wait")
    r.delete(*r.keys(f"{client.prefix}*"))
    client.close()
    return {"workers": fleet_size, "claim": claim, "commit": commit, "commit_claim": both,
            "claim_wait": wait}


def round_trip_floor(server: RedisServer, n_calls: int) -> dict[str, float]:
    """What one EVALSHA round trip of a script that returns at once costs through redis-py
    (the same connection options as NovaClient): wall µs and client CPU µs per call. No
    queue can do a round trip per task for less on this machine."""
    client = _client(server.url, f"floor-{uuid.uuid4().hex[:6]}")
    sha = client.redis.script_load("return 1")
    for _ in range(200):
        client.redis.evalsha(sha, 0)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    for _ in range(n_calls):
        client.redis.evalsha(sha, 0)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    client.close()
    return {"wall_us_per_call": wall / n_calls * 1e6, "client_cpu_us_per_call": cpu / n_calls * 1e6}


PROCESSES = (1, 2, 4)
BULL_CONCURRENCY = (1, 100)


def run_section(server: RedisServer, folder: Path, *, quick: bool,
                repeats: int | None = None) -> dict[str, Any]:
    """Rates for 1, 2, 4 processes (nova, RQ and, with node and npm, BullMQ at concurrency
    1 and 100: interleaved in every repeat) and Redis cost per call."""
    n_nova, n_rq = (3000, 1000) if quick else (10000, 3000)
    repeats = repeats or (1 if quick else 3)
    bull = bullmq.setup()
    if not bull["available"]:
        log(bull["note"])
    runs: dict[int, dict[Any, list[dict]]] = {p: {"nova": [], "nova_k1": [], "rq": [], **{
        c: [] for c in BULL_CONCURRENCY}} for p in PROCESSES}
    for rep in range(repeats):
        for p in PROCESSES:
            log(f"throughput {rep + 1}/{repeats}: {p} process(es)")
            runs[p]["nova"].append(nova_rate(server, p, n_nova))
            runs[p]["nova_k1"].append(nova_rate(server, p, n_nova, batched=False))
            runs[p]["rq"].append(rq_rate(server, p, n_rq, folder))
            line = (f"  nova {runs[p]['nova'][-1]['tasks_per_s']:.0f}/s "
                    f"(k=1: {runs[p]['nova_k1'][-1]['tasks_per_s']:.0f}/s), "
                    f"RQ {runs[p]['rq'][-1]['tasks_per_s']:.0f}/s")
            for c in BULL_CONCURRENCY if bull["available"] else ():
                runs[p][c].append(bullmq.rate(server, bull, p, c, n_nova, folder / "bullmq"))
                line += f", BullMQ c={c} {runs[p][c][-1]['tasks_per_s']:.0f}/s"
            log(line)
    costs = []
    for w in (10, 100):
        log(f"throughput: Redis cost per call, {w} registered workers")
        costs.append(redis_cost(server, w, 1000 if quick else 3000))
    floor = round_trip_floor(server, 2000 if quick else 5000)
    log("throughput: real nova-queue worker processes, no-op app")
    worker = worker_throughput.run(server, folder / "workers",
                                   points=worker_throughput.QUICK_POINTS if quick
                                   else worker_throughput.POINTS,
                                   n_tasks=1000 if quick else n_nova, repeats=repeats)
    rows = [_row(p, runs[p], bull["available"]) for p in PROCESSES]
    return {**_summary(rows, bull), **_worker_summary(worker, rows, bull), "rows": rows, "redis_cost": costs, "round_trip_floor": floor,
            "tasks": {"nova": n_nova, "rq": n_rq, "bullmq": n_nova}, "repeats": repeats,
            "loop": (f"claim k={BATCH_K}, then complete_batch of the leases with the next "
                     f"claim in the same call; nova_k1_*: complete_and_claim, one task per "
                     f"round trip"),
            "hiredis": _hiredis()}


def _row(p: int, runs: dict[Any, list[dict]], with_bull: bool) -> dict[str, Any]:
    """One process count's medians; nova ÷ RQ and nova ÷ BullMQ (its better concurrency)
    paired per repeat."""
    nova, rq = runs["nova"], runs["rq"]
    row = {"processes": p,
           "nova_tasks_per_s": median([x["tasks_per_s"] for x in nova]),
           "rq_jobs_per_s": median([x["tasks_per_s"] for x in rq]),
           "nova_redis_cpu_us_per_task": median([x["redis_cpu_us_per_task"] for x in nova]),
           "rq_redis_cpu_us_per_job": median([x["redis_cpu_us_per_task"] for x in rq]),
           "nova_over_rq": median([a["tasks_per_s"] / b["tasks_per_s"]
                                   for a, b in zip(nova, rq)]),
           "nova_redis_script_us_per_task": median([x["redis_script_us_per_task"] for x in nova]),
           "nova_scripts_per_task": median([x["scripts_per_task"] for x in nova]),
           "nova_redis_commands_per_task": median([x["redis_commands_per_task"] for x in nova])}
    k1 = runs.get("nova_k1") or []
    if k1:
        row["nova_k1_tasks_per_s"] = median([x["tasks_per_s"] for x in k1])
        row["nova_k1_redis_cpu_us_per_task"] = median([x["redis_cpu_us_per_task"] for x in k1])
        row["nova_k1_redis_commands_per_task"] = median([x["redis_commands_per_task"]
                                                         for x in k1])
    if with_bull:
        row.update(_bullmq_row(runs, nova, k1))
    return row


def _bullmq_row(runs: dict[Any, list[dict]], nova: list[dict], k1: list[dict]
                ) -> dict[str, Any]:
    """BullMQ's medians at each concurrency; nova ÷ BullMQ's best, paired per repeat."""
    row: dict[str, Any] = {}
    for c in BULL_CONCURRENCY:
        row[f"bullmq_c{c}_jobs_per_s"] = median([x["tasks_per_s"] for x in runs[c]])
        for key in ("redis_cpu_us_per_task", "redis_script_us_per_task", "scripts_per_task",
                    "redis_commands_per_task"):
            row[f"bullmq_c{c}_{key.replace('task', 'job')}"] = median([x[key] for x in runs[c]])
    bests = [max(x["tasks_per_s"] for x in rep) for rep in zip(*(runs[c]
                                                                 for c in BULL_CONCURRENCY))]
    row["nova_over_bullmq"] = median([a["tasks_per_s"] / b for a, b in zip(nova, bests)])
    if k1:
        row["nova_k1_over_bullmq"] = median([a["tasks_per_s"] / b for a, b in zip(k1, bests)])
    return row


def _summary(rows: list[dict[str, Any]], bull: dict[str, Any]) -> dict[str, Any]:
    """The best figures (best ÷ best); BullMQ's only where it ran."""
    best = max(rows, key=lambda row: row["nova_tasks_per_s"])
    rq_best = max(row["rq_jobs_per_s"] for row in rows)
    out = {"nova_tasks_per_s": best["nova_tasks_per_s"], "rq_jobs_per_s": rq_best,
           "nova_over_rq": best["nova_tasks_per_s"] / rq_best,
           "nova_over_rq_1proc": rows[0]["nova_over_rq"],
           "nova_best_processes": best["processes"],
           "nova_redis_cpu_us_per_task": best["nova_redis_cpu_us_per_task"],
           "bullmq": {k: v for k, v in bull.items() if k != "node_path"}}
    if not bull["available"]:
        return out
    top, c = max(((row, c) for row in rows for c in BULL_CONCURRENCY),
                 key=lambda rc: rc[0][f"bullmq_c{rc[1]}_jobs_per_s"])
    k1 = [row for row in rows if "nova_k1_tasks_per_s" in row]
    if k1:  # the one-task-per-call loop of before, best ÷ best
        best_k1 = max(k1, key=lambda row: row["nova_k1_tasks_per_s"])
        out.update({"nova_k1_tasks_per_s": best_k1["nova_k1_tasks_per_s"],
                    "nova_k1_redis_cpu_us_per_task": best_k1["nova_k1_redis_cpu_us_per_task"],
                    "nova_k1_over_bullmq": (best_k1["nova_k1_tasks_per_s"]
                                            / top[f"bullmq_c{c}_jobs_per_s"])})
    out.update({"bullmq_jobs_per_s": top[f"bullmq_c{c}_jobs_per_s"],
                "bullmq_best": {"processes": top["processes"], "concurrency": c},
                "bullmq_redis_cpu_us_per_job": top[f"bullmq_c{c}_redis_cpu_us_per_job"],
                "nova_over_bullmq": best["nova_tasks_per_s"] / top[f"bullmq_c{c}_jobs_per_s"]})
    return out


def _worker_summary(worker: dict[str, Any], rows: list[dict[str, Any]],
                    bull: dict[str, Any]) -> dict[str, Any]:
    """The real workers' figures flat; ÷ BullMQ's best real Worker of the same run."""
    out = {"worker": worker, "nova_worker_tasks_per_s": worker["best_tasks_per_s"],
           "nova_worker_one_process_tasks_per_s": worker["one_process_tasks_per_s"],
           "nova_worker_redis_cpu_us_per_task": worker["best_redis_cpu_us_per_task"]}
    if bull["available"]:
        best_bull = max(row[f"bullmq_c{c}_jobs_per_s"] for row in rows for c in BULL_CONCURRENCY)
        out["nova_worker_over_bullmq"] = worker["best_tasks_per_s"] / best_bull
    return out


def _hiredis() -> bool:
    from redis.utils import HIREDIS_AVAILABLE

    return bool(HIREDIS_AVAILABLE)
