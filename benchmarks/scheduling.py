"""Scheduling quality: one mixed fleet, 64 jittered tasks, four policies, makespan ÷ T*.

Every run: launch the fleet's worker processes and wait until each is ready (nova: its
``worker_joined`` event, i.e. after its startup benchmark; baselines: after the same torch
import, self-test and matmul timing, when they start pulling). t0 = the instant the first
task is enqueued; makespan = last result committed − t0, for every policy. For each
worker, ``c_i`` = max(0, ready − t0) (only a late worker, launched ``late_s`` after t0, has
c_i > 0) and ``t_i`` = its mean task service time (lease / pop → result committed, upload
included). T* is the exact optimum for those (c_i, t_i) (``optimum.optimal_makespan``); a
killed worker only counts tasks it finishes before the kill. A worker that ran no task gets
its nominal time × the fleet's measured/nominal ratio. A queue's own delays — noticing new
work, claim round trips, recovering a killed worker's lease — are not in (c_i, t_i), so
they show up in makespan ÷ T*.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import time
import uuid
from pathlib import Path
from typing import Any

from benchlib import log, median
from fleet import Proc, WorkerClass, start_nova_worker, start_pull_worker, stop_all
from optimum import optimal_makespan, static_split_makespan

from nova_queue import NovaClient, TaskSpec
from nova_queue.apps.synthetic import jittered_seconds
from nova_queue.local import RedisServer, wait_for

# long: one experiment, four policies (nova, FIFO, static split, RQ) on the same fleet,
# the same tasks and the same measure; apart, the baselines could drift from it

FLEET = (
    WorkerClass("h100", 1.0, "H100-like, 1×"),
    WorkerClass("rtx4090", 1.5, "4090-like, 1.5×"),
    WorkerClass("laptop", 10.0, "laptop GPU, 10×"),
    WorkerClass("cpu", 80.0, "CPU, 80×"),
)
FASTEST = "h100"


@dataclasses.dataclass(frozen=True)
class SchedConfig:
    """The scheduling experiment; times in seconds on the 1× (reference) worker."""

    ref_s: float = 0.1
    n_tasks: int = 64
    jitter: float = 0.10
    seed: int = 2024
    lease_ttl_s: float = 3.0
    late_s: float = 2.0
    kill_fraction: float = 0.5
    timeout_s: float = 300.0
    ready_timeout_s: float = 180.0


@dataclasses.dataclass
class WorkerStat:
    """One worker of one run: c_i, t_i, what it did, when it stopped (killed)."""

    name: str
    slowdown: float
    start_s: float
    per_task_s: float
    run_s: float
    tasks: int
    end_s: float = math.inf
    estimated: bool = False
    first_s: float = math.inf  # first task taken, s after t0 (pickup latency)


@dataclasses.dataclass
class Run:
    """One policy × scenario run."""

    policy: str
    scenario: str
    makespan_s: float
    workers: list[WorkerStat]
    n_tasks: int
    computed: bool = False
    enqueue_s: float = 0.0  # t0 → every task queued
    backup_waste: float = 0.0  # seconds on attempts that lost a backup race ÷ all run

    @property
    def optimum_s(self) -> float:
        return optimal_makespan([w.start_s for w in self.workers],
                                [w.per_task_s for w in self.workers], self.n_tasks,
                                [w.end_s for w in self.workers])

    @property
    def ratio(self) -> float:
        return self.makespan_s / self.optimum_s

    def as_dict(self) -> dict[str, Any]:
        return {"policy": self.policy, "scenario": self.scenario, "makespan_s": self.makespan_s,
                "optimum_s": self.optimum_s, "makespan_over_optimum": self.ratio,
                "computed": self.computed, "enqueue_s": self.enqueue_s,
                "backup_waste": self.backup_waste,
                "workers": [{k: (None if isinstance(v, float) and math.isinf(v) else v)
                             for k, v in dataclasses.asdict(w).items()} for w in self.workers]}


def task_seconds(cfg: SchedConfig) -> list[float]:
    """Each task's reference seconds: ``ref_s`` ± ``jitter`` (uniform, seeded: same every run
    and every policy) — exactly what the synthetic app's ``jitter`` param gives nova."""
    return [jittered_seconds(cfg.ref_s, cfg.jitter, cfg.seed, i) for i in range(cfg.n_tasks)]


def _fill(stats: dict[str, WorkerStat], cfg: SchedConfig) -> list[WorkerStat]:
    """Workers with no task get nominal time × the measured/nominal ratio of the others."""
    ratios = [w.per_task_s / (cfg.ref_s * w.slowdown) for w in stats.values() if w.tasks]
    calib = median(ratios) if ratios else 1.0
    for w in stats.values():
        if not w.tasks:
            w.per_task_s, w.estimated = cfg.ref_s * w.slowdown * calib, True
    return [stats[c.name] for c in FLEET if c.name in stats]


# ---- nova-queue --------------------------------------------------------------------------
def run_nova(server: RedisServer, cfg: SchedConfig, scenario: str, folder: Path) -> Run:
    """Real ``nova-queue worker`` processes; scenario ``base``, ``kill`` or ``late``."""
    ns = f"sched-{scenario}-{uuid.uuid4().hex[:6]}"
    heartbeat_s = cfg.lease_ttl_s / 5
    client = NovaClient.from_url(server.url, namespace=ns, lease_ttl_s=cfg.lease_ttl_s,
                                 heartbeat_interval_s=heartbeat_s)
    store = f"file://{folder}/store-{ns}"
    procs: dict[str, Proc] = {}

    late = FASTEST if scenario == "late" else None
    go_key = f"bench:{ns}:go"
    killed_at = math.inf
    try:
        for c in FLEET:
            procs[c.name] = start_nova_worker(
                server.url, ns, store, folder / ns, c.name, c.slowdown,
                lease_ttl_s=cfg.lease_ttl_s, heartbeat_s=heartbeat_s,
                go_key=go_key if c.name == late else None)
        on_time = len(FLEET) - (late is not None)
        wait_for(lambda: sum(e.type == "worker_joined" for e in client.events(count=1000))
                 >= on_time, cfg.ready_timeout_s, 0.05, f"{on_time} nova workers to join")
        if late:
            _wait_warm(server, go_key, cfg)
        t0 = time.time()
        job_key = client.keys.job(_enqueue_jobs(client, cfg))
        enqueue_s = time.time() - t0
        deadline = time.monotonic() + cfg.timeout_s
        released = 0
        while (done := int(client.redis.hget(job_key, "done") or 0)) < cfg.n_tasks:
            if time.monotonic() > deadline:
                raise TimeoutError(f"nova {scenario}: {done}/{cfg.n_tasks} tasks after "
                                   f"{cfg.timeout_s:g} s; logs in {folder / ns}")
            if late and not released and time.time() >= t0 + cfg.late_s:
                released = client.redis.rpush(go_key, "go")
            half_done = done >= cfg.n_tasks * cfg.kill_fraction
            if scenario == "kill" and math.isinf(killed_at) and half_done:
                killed_at = procs[FASTEST].kill9()
            time.sleep(0.01)
    finally:
        stop_all(list(procs.values()))
    events = _all_events(client)
    client.close()
    run = _nova_run(events, t0, killed_at, scenario, cfg)
    run.enqueue_s = enqueue_s
    run.backup_waste = backup_waste_fraction(events)
    return run


def backup_waste_fraction(events: list[Any]) -> float:
    """Task-seconds of the attempts that lost a backup race over all task-seconds run."""
    wasted = sum(float(e.fields.get("loser_run_s") or 0) for e in events
                 if e.type in ("backup_won", "backup_lost"))
    useful = sum(float(e.fields.get("run_s") or 0) for e in events if e.type == "completed")
    return wasted / (wasted + useful) if wasted + useful else 0.0


def _enqueue_jobs(client: NovaClient, cfg: SchedConfig, timeout_s: float | None = None) -> str:
    """One atomic job of N tasks; each runs its jittered duration (the synthetic app's
    ``jitter`` param), while its cost stays the nominal ``ref_s``: the scheduler does not
    see the jitter."""
    tasks = [TaskSpec(f"bench task {i}", cfg.ref_s) for i in range(cfg.n_tasks)]
    return client.enqueue("synthetic", tasks, name="bench", timeout_s=timeout_s, params={
        "seconds": cfg.ref_s, "jitter": cfg.jitter, "jitter_seed": cfg.seed})


def _wait_warm(server: RedisServer, go_key: str, cfg: SchedConfig) -> None:
    """Until the held-back late worker has done its imports (``prewarm.py`` says so)."""
    r = server.client()
    wait_for(lambda: r.llen(f"{go_key}:warm"), cfg.ready_timeout_s, 0.05,
             "the late worker's imports")
    r.close()


def _all_events(client: NovaClient, after: str = "0-0") -> list[Any]:
    """The namespace's events after ``after`` (a stream id), oldest first."""
    out = []
    while batch := client.events(after, count=5000):
        out += batch
        after = batch[-1].id
    return out


def _nova_run(events: list[Any], t0: float, killed_at: float, scenario: str,
              cfg: SchedConfig, stopped: str = FASTEST) -> Run:
    """The run from its events; worker ``stopped`` counts until ``killed_at`` (T*)."""
    names: dict[str, str] = {}
    stats = {c.name: WorkerStat(c.name, c.slowdown, math.inf, 0.0, 0.0, 0) for c in FLEET}
    claims: dict[tuple[str, str, str], float] = {}
    service: dict[str, list[float]] = {c.name: [] for c in FLEET}
    runs: dict[str, list[float]] = {c.name: [] for c in FLEET}
    last = t0
    for e in events:
        ts, f = e.ts_ms / 1000, e.fields
        if e.type == "worker_joined" and f["name"] in stats:  # not one outside the fleet
            names[f["worker"]] = f["name"]
            stats[f["name"]].start_s = max(ts - t0, 0.0)
        elif e.type in ("claimed", "backup_started"):
            claims[(f["job"], f["task"], f["lease_gen"])] = ts
            st = stats[names[f["worker"]]]
            st.first_s = min(st.first_s, ts - t0)
        elif e.type == "completed":
            name = names[f["worker"]]
            service[name].append(ts - claims[(f["job"], f["task"], f["lease_gen"])])
            runs[name].append(float(f["run_s"]))
            last = max(last, ts)
    for name, st in stats.items():
        if service[name]:
            st.tasks, st.per_task_s = len(service[name]), sum(service[name]) / len(service[name])
            st.run_s = sum(runs[name]) / len(runs[name])
    if math.isfinite(killed_at):
        stats[stopped].end_s = killed_at - t0
    return Run("nova", scenario, last - t0, _fill(stats, cfg), cfg.n_tasks)


# ---- baselines: FIFO pull and static split over Redis lists --------------------------------
def run_pull(server: RedisServer, cfg: SchedConfig, policy: str, scenario: str,
             folder: Path) -> Run:
    """``fifo``: one shared list, each worker pops the next task when free (what RQ does);
    ``static``: each worker's own list of N/W tasks dealt round-robin up front."""
    r = server.client()
    tag = f"bench:{policy}:{uuid.uuid4().hex[:6]}"
    ready_key, done_key = f"{tag}:ready", f"{tag}:done"
    names = [c.name for c in FLEET]
    store = f"file://{folder}/store-{tag[6:].replace(':', '-')}"
    procs: dict[str, Proc] = {}

    late = FASTEST if scenario == "late" else None
    go_key = f"{tag}:go"
    try:
        for c in FLEET:
            queue = f"{tag}:q:{c.name}" if policy == "static" else f"{tag}:q:all"
            procs[c.name] = start_pull_worker(
                server.url, folder / tag.replace(":", "-"), c.name, c.slowdown, store_url=store,
                ready_key=ready_key, list_key=queue, done_key=done_key,
                go_key=go_key if c.name == late else None)
        on_time = len(FLEET) - (late is not None)
        wait_for(lambda: r.llen(ready_key) >= on_time, cfg.ready_timeout_s, 0.05,
                 f"{on_time} {policy} workers to start")
        if late:
            _wait_warm(server, go_key, cfg)
        t0 = time.time()
        pipe = r.pipeline(transaction=False)
        for i, seconds in enumerate(task_seconds(cfg)):
            owner = names[i % len(names)] if policy == "static" else "all"
            pipe.rpush(f"{tag}:q:{owner}", json.dumps({
                "job": f"{policy}{tag[-6:]}", "index": i, "text": f"bench task {i}",
                "seconds": seconds}))
        pipe.execute()
        deadline = time.monotonic() + cfg.timeout_s
        released = 0
        while r.llen(done_key) < cfg.n_tasks:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{policy} {scenario}: not done after {cfg.timeout_s:g} s")
            if late and not released and time.time() >= t0 + cfg.late_s:
                released = r.rpush(go_key, "go")
            time.sleep(0.01)
    finally:
        stop_all(list(procs.values()))
    ready = [json.loads(x) for x in r.lrange(ready_key, 0, -1)]
    done = [json.loads(x) for x in r.lrange(done_key, 0, -1)]
    r.close()
    return _records_run(policy, scenario, t0, ready, done, cfg)


def _records_run(policy: str, scenario: str, t0: float, ready: list[dict], done: list[dict],
                 cfg: SchedConfig) -> Run:
    stats = {c.name: WorkerStat(c.name, c.slowdown, math.inf, 0.0, 0.0, 0) for c in FLEET}
    for rec in ready:
        stats[rec["worker"]].start_s = max(rec["ready"] - t0, 0.0)
    by: dict[str, list[dict]] = {}
    for rec in done:
        by.setdefault(rec["worker"], []).append(rec)
    for name, recs in by.items():
        st = stats[name]
        st.tasks = len(recs)
        st.per_task_s = sum(x["end"] - x["start"] for x in recs) / len(recs)
        st.run_s = sum(x["run_s"] for x in recs) / len(recs)
        st.first_s = min(x["start"] for x in recs) - t0
    return Run(policy, scenario, max(x["end"] for x in done) - t0, _fill(stats, cfg),
               cfg.n_tasks)


def static_model(fifo: Run, cfg: SchedConfig) -> Run:
    """The static split computed from a FIFO run's (c_i, t_i) (same baseline workers):
    worker i runs its N/W round-robin tasks back to back (``--quick`` skips the real run)."""
    secs = task_seconds(cfg)
    times: list[list[float]] = [[] for _ in fifo.workers]
    for j, s in enumerate(secs):
        i = j % len(fifo.workers)
        times[i].append(fifo.workers[i].per_task_s * s / cfg.ref_s)
    span = static_split_makespan([w.start_s for w in fifo.workers], times)
    workers = [dataclasses.replace(w, tasks=len(times[i])) for i, w in enumerate(fifo.workers)]
    return Run("static", fifo.scenario, span, workers, cfg.n_tasks, computed=True)


# ---- RQ ------------------------------------------------------------------------------------
def run_rq(server: RedisServer, cfg: SchedConfig, folder: Path) -> Run:
    """Real RQ SimpleWorker processes (same startup, same per-task work and store)."""
    from rq import Queue, Worker
    from rq.job import Job

    r = server.client(decode=False)
    tag = f"sched{uuid.uuid4().hex[:6]}"
    q = Queue(tag, connection=r)
    ready_key = f"bench:{tag}:ready"
    store = f"file://{folder}/store-{tag}"
    procs = [start_pull_worker(server.url, folder / tag, c.name, c.slowdown, store_url=store,
                               ready_key=ready_key, rq_queue=tag) for c in FLEET]
    try:
        wait_for(lambda: r.llen(ready_key) >= len(procs) and Worker.count(queue=q) >= len(procs),
                 cfg.ready_timeout_s, 0.05, "RQ workers to start")
        datas = [Queue.prepare_data("rq_jobs.synthetic_task",
                                    args=(tag, i, f"bench task {i}", s), job_id=f"{tag}-{i}",
                                    result_ttl=3600, timeout=600)
                 for i, s in enumerate(task_seconds(cfg))]
        t0 = time.time()
        with r.pipeline() as pipe:
            q.enqueue_many(datas, pipeline=pipe)
            pipe.execute()

        def finished() -> bool:
            if q.failed_job_registry.count:
                job = Job.fetch(q.failed_job_registry.get_job_ids()[0], connection=r)
                raise RuntimeError(f"RQ job failed: {job.latest_result().exc_string}")
            return q.finished_job_registry.count >= cfg.n_tasks

        wait_for(finished, cfg.timeout_s, 0.01, "RQ jobs to finish")
    finally:
        stop_all(procs)
    jobs = Job.fetch_many([d.job_id for d in datas], connection=r)
    done = [{"worker": j.return_value()["worker"], "run_s": j.return_value()["run_s"],
             "start": _ts(j.started_at), "end": _ts(j.ended_at)} for j in jobs]
    ready = [json.loads(x) for x in r.lrange(ready_key, 0, -1)]
    r.close()
    return _records_run("rq", "base", t0, ready, done, cfg)


def _ts(dt: datetime.datetime) -> float:
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=datetime.timezone.utc)
    return dt.timestamp()


# ---- the section -----------------------------------------------------------------------------
def run_section(server: RedisServer, folder: Path, *, repeats: int, real_static: bool,
                cfg: SchedConfig = SchedConfig()) -> dict[str, Any]:
    """All runs, interleaved per repeat so machine noise hits every policy alike."""
    runs: list[Run] = []
    plan = [("nova", "base"), ("fifo", "base"), ("rq", "base"), ("nova", "kill"),
            ("nova", "late"), ("fifo", "late")]
    for rep in range(repeats):
        for policy, scenario in plan:
            log(f"scheduling {rep + 1}/{repeats}: {policy} {scenario}")
            if policy == "nova":
                run = run_nova(server, cfg, scenario, folder)
            elif policy == "rq":
                run = run_rq(server, cfg, folder)
            else:
                run = run_pull(server, cfg, policy, scenario, folder)
            log(f"  makespan {run.makespan_s:.2f} s, T* {run.optimum_s:.2f} s, "
                f"ratio {run.ratio:.3f}, tasks {[w.tasks for w in run.workers]}")
            runs.append(run)
        fifo = [r for r in runs if (r.policy, r.scenario) == ("fifo", "base")][-1]
        if real_static and rep == 0:
            log("scheduling: static split (real run; the 80× worker runs N/4 tasks)")
            runs.append(run_pull(server, cfg, "static", "base", folder))
        elif not real_static:
            runs.append(static_model(fifo, cfg))
        if runs[-1].policy == "static":
            log(f"  static makespan {runs[-1].makespan_s:.1f} s, ratio {runs[-1].ratio:.1f}")
    return summarize(runs, cfg)


def summarize(runs: list[Run], cfg: SchedConfig) -> dict[str, Any]:
    """Medians over repeats of makespan ratios; pairwise ratios taken within a repeat."""
    def pick(policy: str, scenario: str) -> list[Run]:
        return [r for r in runs if (r.policy, r.scenario) == (policy, scenario)]

    def pair(a: str, b: str, scenario: str = "base") -> float:
        xs, ys = pick(a, scenario), pick(b, scenario)
        if a == "static" and len(xs) < len(ys):  # one real static run: compare to the first
            ys = ys[:len(xs)]
        return median([x.makespan_s / y.makespan_s for x, y in zip(xs, ys)])

    def ratio(policy: str, scenario: str = "base") -> float:
        return median([r.ratio for r in pick(policy, scenario)])

    return {
        "makespan_over_optimum": ratio("nova"),
        "fifo_over_nova": pair("fifo", "nova"),
        "rq_over_nova": pair("rq", "nova"),
        "kill_makespan_over_optimum": ratio("nova", "kill"),
        "late_makespan_over_optimum": ratio("nova", "late"),
        "backup_waste_fraction": median([r.backup_waste for r in pick("nova", "base")]),
        "static_over_nova": pair("static", "nova"),
        "fifo_late_over_nova_late": pair("fifo", "nova", "late"),
        "fifo_over_optimum": ratio("fifo"),
        "rq_over_optimum": ratio("rq"),
        "static_over_optimum": ratio("static"),
        "static_computed": all(r.computed for r in pick("static", "base")),
        "config": dataclasses.asdict(cfg),
        "fleet": [dataclasses.asdict(c) for c in FLEET],
        "runs": [r.as_dict() for r in runs],
    }
