"""Gray failures in the scheduling benchmark: one worker of the mixed fleet misbehaves.

Same fleet, tasks and measurement as ``scheduling.py`` (real ``nova-queue worker``
processes, makespan from the first enqueue to the last commit, T* from the speeds actually
run), with one worker's failure switched on through the synthetic app's control file
(``-o control=PATH``):

- ``throttle``: the fastest worker turns 100x slower once half the tasks are done. T*
  counts it only until that instant (as a killed worker): what it does afterwards is a
  bonus no schedule needs.
- ``blackhole``: the 4090-like worker fails every task at once, from the start of the job
  (switched on once it joined: with its failure on from the process's start, its startup
  self-test fails and it never serves the app). T* is the healthy workers' (the broken one
  finishes nothing); ``failed_tasks`` must be 0.
- ``hang``: the fastest worker's tasks never return (its heartbeat lives) from a quarter
  of the job on; the job's run-time limit is ``hang_timeout_s``. ``hang_recovery_s``: from
  the claim of its first hung task to that task's commit elsewhere.
- ``phantom``: beside the healthy fleet, a worker registers a benchmark of 1e-9 s per cost
  unit and keeps its heartbeat, but never claims (a lie through the gateway's protocol,
  made here with the client). T* is the healthy fleet's: the phantom runs nothing.

The base scenario's runs (``scheduling.py``) give ``backup_waste_fraction``: seconds spent
on backup attempts that lost, or on the attempts they beat, over all task-seconds.
"""

from __future__ import annotations

import json
import math
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from benchlib import log, median
from fleet import Proc, start_nova_worker, stop_all
from scheduling import FASTEST, FLEET, Run, SchedConfig, _all_events, _enqueue_jobs, _nova_run

from nova_queue import NovaClient
from nova_queue.local import RedisServer, wait_for

SCENARIOS = ("throttle", "blackhole", "hang", "phantom")
PHANTOM = "phantom.000000000000"
BROKEN = "rtx4090"  # the blackhole


def _control(path: Path, **state: Any) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state))
    tmp.replace(path)


def run_gray(server: RedisServer, cfg: SchedConfig, scenario: str, folder: Path,
             hang_timeout_s: float) -> tuple[Run, dict[str, Any]]:
    """One run of ``scenario``; returns the run and what it measured besides makespan."""
    ns = f"gray-{scenario}-{uuid.uuid4().hex[:6]}"
    heartbeat_s = cfg.lease_ttl_s / 5
    client = NovaClient.from_url(server.url, namespace=ns, lease_ttl_s=cfg.lease_ttl_s,
                                 heartbeat_interval_s=heartbeat_s)
    controls = {c.name: folder / ns / f"{c.name}.control.json" for c in FLEET}
    (folder / ns).mkdir(parents=True, exist_ok=True)
    for path in controls.values():
        _control(path)
    procs: dict[str, Proc] = {}
    stop = threading.Event()
    try:
        for c in FLEET:
            procs[c.name] = start_nova_worker(
                server.url, ns, f"file://{folder}/store-{ns}", folder / ns, c.name, c.slowdown,
                lease_ttl_s=cfg.lease_ttl_s, heartbeat_s=heartbeat_s,
                extra=("-o", f"control={controls[c.name]}"))
        wait_for(lambda: sum(e.type == "worker_joined" for e in client.events(count=1000))
                 >= len(FLEET), cfg.ready_timeout_s, 0.05, f"{len(FLEET)} nova workers")
        if scenario == "blackhole":  # after its startup self-test passed (else it never joins)
            _control(controls[BROKEN], fail="all")
        if scenario == "phantom":
            _phantom(client, heartbeat_s, stop)
        t0 = time.time()
        job = _enqueue_jobs(client, cfg, timeout_s=hang_timeout_s if scenario == "hang" else None)
        job_key = client.keys.job(job)
        switched_at = _until_done(client, job_key, cfg, scenario, controls[FASTEST], folder / ns)
    finally:
        stop.set()
        stop_all(list(procs.values()))
    events = _all_events(client)
    failed = int(client.redis.hget(job_key, "failed") or 0)
    client.close()
    # T*: the throttled fastest worker counts until the switch, the blackhole not at all
    end = switched_at if scenario == "throttle" else math.inf
    run = _nova_run(events, t0, end, scenario, cfg, stopped=FASTEST)
    if scenario == "blackhole":
        for w in run.workers:
            if w.name == BROKEN:
                w.end_s, w.tasks = 0.0, 0
    extra: dict[str, Any] = {"failed_tasks": failed, "backups": sum(
        e.type == "backup_started" for e in events)}
    if scenario == "hang":
        extra["recovery_s"] = _hang_recovery_s(events, switched_at)
    return run, extra


def _until_done(client: NovaClient, job_key: str, cfg: SchedConfig, scenario: str,
                control: Path, logs: Path) -> float:
    """Wait for the job's tasks; a throttle or hang scenario switches the fastest worker
    (its ``control`` file) at its point of the job. When it switched (inf: never)."""
    deadline = time.monotonic() + cfg.timeout_s
    at = {"throttle": 0.5, "hang": 0.25}.get(scenario)
    switched_at = math.inf
    while (done := int(client.redis.hget(job_key, "done") or 0)) < cfg.n_tasks:
        if time.monotonic() > deadline:
            raise TimeoutError(f"nova {scenario}: {done}/{cfg.n_tasks} tasks after "
                               f"{cfg.timeout_s:g} s; logs in {logs}")
        if at is not None and math.isinf(switched_at) and done >= cfg.n_tasks * at:
            _control(control, **({"slowdown": 100} if scenario == "throttle"
                                 else {"hang": "soft"}))
            switched_at = time.time()
        time.sleep(0.01)
    return switched_at


def _phantom(client: NovaClient, heartbeat_s: float, stop: threading.Event) -> None:
    """Register the phantom (1e-9 s per cost unit, never claims) and beat its heart until
    ``stop``."""
    client.register_worker(PHANTOM, {"name": "phantom", "backend": "cuda"}, ["synthetic"],
                           {"synthetic": {"bench_s": 1e-9}})

    def beat() -> None:
        while not stop.wait(heartbeat_s):
            client.renew(PHANTOM, [])

    threading.Thread(target=beat, daemon=True, name="phantom-heartbeat").start()


def _hang_recovery_s(events: list[Any], switched_at: float) -> float:
    """From the claim of the hanging worker's first task after the switch to its commit."""
    names = {e.fields["worker"]: e.fields["name"] for e in events if e.type == "worker_joined"}
    hung = next((e for e in events if e.type == "claimed" and e.ts_ms / 1000 >= switched_at
                 and names.get(e.fields["worker"]) == FASTEST), None)
    if hung is None:
        return math.nan
    key = (hung.fields["job"], hung.fields["task"])
    done = next((e for e in events if e.type == "completed"
                 and (e.fields["job"], e.fields["task"]) == key), None)
    return math.nan if done is None else (done.ts_ms - hung.ts_ms) / 1000


def run_section(server: RedisServer, folder: Path, *, repeats: int,
                cfg: SchedConfig = SchedConfig(), hang_timeout_s: float = 3.0) -> dict[str, Any]:
    """Every gray scenario, ``repeats`` times, interleaved."""
    rows: dict[str, list[tuple[Run, dict[str, Any]]]] = {s: [] for s in SCENARIOS}
    for rep in range(repeats):
        for scenario in SCENARIOS:
            log(f"gray failures {rep + 1}/{repeats}: nova {scenario}")
            run, extra = run_gray(server, cfg, scenario, folder, hang_timeout_s)
            log(f"  makespan {run.makespan_s:.2f} s, T* {run.optimum_s:.2f} s, ratio "
                f"{run.ratio:.3f}, {extra}")
            rows[scenario].append((run, extra))

    def ratio(scenario: str) -> float:
        return median([r.ratio for r, _ in rows[scenario]])

    return {
        "throttle_makespan_over_optimum": ratio("throttle"),
        "blackhole_makespan_over_optimum": ratio("blackhole"),
        "blackhole_failed_tasks": max(x["failed_tasks"] for _, x in rows["blackhole"]),
        "hang_recovery_s": max(x["recovery_s"] for _, x in rows["hang"]),
        "phantom_makespan_over_optimum": ratio("phantom"),
        "phantom_makespan_s": median([r.makespan_s for r, _ in rows["phantom"]]),
        "hang_timeout_s": hang_timeout_s,
        "lease_ttl_s": cfg.lease_ttl_s,
        "backups": {s: [x["backups"] for _, x in rows[s]] for s in SCENARIOS},
        "runs": [{**r.as_dict(), **x} for s in SCENARIOS for r, x in rows[s]],
    }
