"""Cost-aware placement under deadlines: a priced fleet of real ``nova-queue worker``
processes (1× at $4/h, 2× at $1/h, 8× at $0.2/h, slower as they get cheaper), one job at a
time with a deadline between the all-workers optimum and the cheapest workers alone, and
one without a deadline.

Every run: t0 = the instant the job is enqueued; its finish = its last commit. Each
worker's ``t_i`` is its mean service time (lease → result committed) over the repeat's
runs; the exact optimum (``optimum.least_cost``: the least dollars that finish the job's
tasks by its deadline, for those t_i and the prices) is what the run's spend (each
committed attempt's service time × its worker's price, plus the lost halves of backup
races) is compared with. The job without a deadline is compared with the exact optimal
makespan T* (``optimum.optimal_makespan``), as the scheduling section does.

    python benchmarks/cost.py [--quick] [--json OUT] [--doc DIR]
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from benchlib import load_avg, log, median, section_main, write_block
from fleet import Proc, start_nova_worker, stop_all
from optimum import least_cost, optimal_makespan
from scheduling import _all_events

from nova_queue import NovaClient, TaskSpec
from nova_queue.local import RedisServer, wait_for

NA = "n/a"


@dataclasses.dataclass(frozen=True)
class Tier:
    """Workers of one price: how many, how much slower than the reference, dollars/hour."""

    name: str
    count: int
    slowdown: float
    price: float


FLEET = (Tier("dear", 1, 1.0, 4.0), Tier("mid", 2, 2.0, 1.0), Tier("cheap", 8, 8.0, 0.2))


@dataclasses.dataclass(frozen=True)
class CostConfig:
    """The experiment; times in seconds on the 1× worker."""

    ref_s: float = 0.5
    n_tasks: int = 48
    #: deadlines at these fractions of the way from T* (all workers) to the cheapest alone
    fractions: tuple[float, ...] = (0.35, 0.6, 0.85)
    open_tasks: int = 64
    lease_ttl_s: float = 3.0
    timeout_s: float = 300.0
    ready_timeout_s: float = 180.0


def workers_of(fleet: tuple[Tier, ...] = FLEET) -> list[tuple[str, Tier]]:
    """(name, tier) per worker process."""
    return [(f"{t.name}{i}", t) for t in fleet for i in range(t.count)]


def deadlines_s(cfg: CostConfig, fleet: tuple[Tier, ...] = FLEET) -> list[float]:
    """The deadlines (s after enqueue) from the nominal speeds."""
    ws = workers_of(fleet)
    all_s = optimal_makespan([0.0] * len(ws), [cfg.ref_s * t.slowdown for _, t in ws],
                             cfg.n_tasks)
    cheapest = min(t.price * t.slowdown for t in fleet)
    cheap = [t for _, t in ws if t.price * t.slowdown == cheapest]
    cheap_s = optimal_makespan([0.0] * len(cheap), [cfg.ref_s * t.slowdown for t in cheap],
                               cfg.n_tasks)
    return [all_s + f * (cheap_s - all_s) for f in cfg.fractions]


def run_job(client: NovaClient, cfg: CostConfig, n: int, deadline_s: float | None,
            after: str) -> dict[str, Any]:
    """One job on the running fleet; its timings and per-worker service times from events."""
    t0 = time.time()
    job = client.enqueue("synthetic", [TaskSpec(f"cost task {i}", cfg.ref_s) for i in range(n)],
                         name="cost", params={"seconds": cfg.ref_s},
                         deadline=None if deadline_s is None
                         else datetime.timedelta(seconds=deadline_s))
    key = client.keys.job(job)
    wait_for(lambda: int(client.redis.hget(key, "done") or 0) >= n, cfg.timeout_s, 0.02,
             f"cost job {job}")
    events = [e for e in _all_events(client, after) if e.fields.get("job") == job]
    claims: dict[tuple[str, str], float] = {}
    service: dict[str, list[float]] = {}
    lost: dict[str, float] = {}
    finish = t0
    for e in events:
        f, ts = e.fields, e.ts_ms / 1000
        if e.type in ("claimed", "backup_started"):
            claims[(f["task"], f["lease_gen"])] = ts
        elif e.type == "completed":
            service.setdefault(f["worker"], []).append(ts - claims[(f["task"], f["lease_gen"])])
            finish = max(finish, ts)
        elif e.type in ("backup_won", "backup_lost"):
            lost[f["loser"]] = lost.get(f["loser"], 0.0) + float(f.get("loser_run_s") or 0)
    st = client.job(job, with_tasks=False)
    return {"job": job, "deadline_s": deadline_s, "makespan_s": finish - t0,
            "service": service, "lost_s": lost, "behind": st.behind_ms is not None,
            "cost_recorded": st.cost}


def start_fleet(server: RedisServer, folder: Path, cfg: CostConfig) -> tuple[NovaClient,
                                                                             list[Proc], dict]:
    """Every worker process, each with its price; returns once all joined (their ids)."""
    ns = f"cost-{uuid.uuid4().hex[:6]}"
    client = NovaClient.from_url(server.url, namespace=ns, lease_ttl_s=cfg.lease_ttl_s,
                                 heartbeat_interval_s=cfg.lease_ttl_s / 5)
    store = f"file://{folder}/store-{ns}"
    procs = [start_nova_worker(server.url, ns, store, folder / ns, name, t.slowdown,
                               lease_ttl_s=cfg.lease_ttl_s, heartbeat_s=cfg.lease_ttl_s / 5,
                               extra=("--cost-per-hour", f"{t.price:g}"))
             for name, t in workers_of()]
    want = len(procs)
    wait_for(lambda: sum(e.type == "worker_joined" for e in client.events(count=1000)) >= want,
             cfg.ready_timeout_s, 0.05, f"{want} priced workers to join")
    ids = {e.fields["worker"]: e.fields["name"] for e in client.events(count=1000)
           if e.type == "worker_joined"}
    return client, procs, ids


def score(runs: list[dict[str, Any]], ids: dict[str, str], cfg: CostConfig) -> None:
    """Each run's spend, its optimum and whether it met its deadline (in place), from every
    worker's mean service time over the repeat's runs."""
    tiers = dict(workers_of())
    names = sorted(tiers)
    pooled: dict[str, list[float]] = {n: [] for n in names}
    for run in runs:
        for wid, xs in run["service"].items():
            pooled[ids[wid]] += xs
    known = [median(v) / tiers[n].slowdown for n, v in pooled.items() if v]
    ref = median(known) if known else cfg.ref_s
    t_i = [median(pooled[n]) if pooled[n] else ref * tiers[n].slowdown for n in names]
    prices = [tiers[n].price for n in names]
    for run in runs:
        spend = sum(sum(xs) * tiers[ids[w]].price for w, xs in run["service"].items())
        spend += sum(s * tiers[ids[w]].price for w, s in run["lost_s"].items() if w in ids)
        run["cost"] = spend / 3600
        run["tasks_by_worker"] = {ids[w]: len(xs) for w, xs in run["service"].items()}
        if run["deadline_s"] is None:
            run["optimum_s"] = optimal_makespan([0.0] * len(names), t_i, cfg.open_tasks)
            run["makespan_over_optimum"] = run["makespan_s"] / run["optimum_s"]
        else:
            run["met"] = run["makespan_s"] <= run["deadline_s"]
            run["optimum_cost"] = least_cost([0.0] * len(names), t_i, prices, cfg.n_tasks,
                                             run["deadline_s"])
            run["cost_over_optimum"] = run["cost"] / run["optimum_cost"]
        del run["service"], run["lost_s"]


def run_repeat(server: RedisServer, folder: Path, cfg: CostConfig) -> list[dict[str, Any]]:
    """One fleet: the job without a deadline first (every worker measured), then one job
    per deadline."""
    client, procs, ids = start_fleet(server, folder, cfg)
    runs = []
    try:
        for deadline in [None, *deadlines_s(cfg)]:
            after = client.last_event_id() or "0-0"
            n = cfg.open_tasks if deadline is None else cfg.n_tasks
            runs.append(run_job(client, cfg, n, deadline, after))
            r = runs[-1]
            log(f"cost: deadline {'none' if deadline is None else f'{deadline:.1f} s'}: "
                f"makespan {r['makespan_s']:.2f} s, behind {r['behind']}")
    finally:
        stop_all(procs)
        client.close()
    score(runs, ids, cfg)
    return runs


def run_section(server: RedisServer, folder: Path, *, quick: bool, repeats: int | None = None,
                cfg: CostConfig = CostConfig()) -> dict[str, Any]:
    """``repeats`` fleets (1 quick, else 2), each its runs; the figures over all of them."""
    started_load = load_avg()
    runs = [r for _ in range(repeats or (1 if quick else 2)) for r in run_repeat(server, folder,
                                                                                 cfg)]
    timed = [r for r in runs if r["deadline_s"] is not None]
    return {"deadline_met_fraction": sum(r["met"] for r in timed) / len(timed),
            "cost_over_optimum": median([r["cost_over_optimum"] for r in timed]),
            "cost_over_optimum_max": max(r["cost_over_optimum"] for r in timed),
            "no_deadline_makespan_over_optimum": median(
                [r["makespan_over_optimum"] for r in runs if r["deadline_s"] is None]),
            "runs": runs, "config": dataclasses.asdict(cfg),
            "fleet": [dataclasses.asdict(t) for t in FLEET],
            "load_avg": [started_load, load_avg()], "quick": quick, "cores": os.cpu_count(),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def targets(c: dict[str, Any] | None) -> list[tuple[str, Any, Any]]:
    """The cost section's targets: (name, measured, met)."""
    names = ("cost: deadlines met ≥ 95 % of jobs",
             "cost: spend ≤ 1.10 × the least-cost plan meeting the deadline (median)",
             "cost: no deadline, makespan ≤ 1.03 × T*")
    if not c:
        return [(n, NA, None) for n in names]
    return [(names[0], f"{100 * c['deadline_met_fraction']:.0f} %",
             c["deadline_met_fraction"] >= 0.95),
            (names[1], f"{c['cost_over_optimum']:.3f} × (worst {c['cost_over_optimum_max']:.3f})",
             c["cost_over_optimum"] <= 1.10),
            (names[2], f"{c['no_deadline_makespan_over_optimum']:.3f} × T*",
             c["no_deadline_makespan_over_optimum"] <= 1.03)]


def section(c: dict[str, Any], table: Any) -> list[str]:
    """The BENCHMARKS.md section (``table``: report's Markdown table builder)."""
    fleet = ", ".join(f"{t['count']}× {t['name']} at ${t['price']:g}/h ({t['slowdown']:g}× slower)"
                      for t in c["fleet"])
    cfg = c["config"]
    intro = (f"Real `nova-queue worker` processes with prices: {fleet}; synthetic tasks of "
             f"{cfg['ref_s']:g} s on the 1× worker. One job at a time: {cfg['open_tasks']} "
             f"tasks without a deadline, then {cfg['n_tasks']} tasks with a deadline at "
             + ", ".join(f"{f:.0%}" for f in cfg["fractions"])
             + " of the way from the all-workers optimum T* to the cheapest workers alone. "
             "Spend: each committed attempt's service time × its worker's price; optimum: "
             "the least-cost plan that meets the deadline for the measured per-worker times.")
    if c.get("date"):
        intro += (f" Measured by `python benchmarks/run.py --only cost"
                  f"{' --quick' if c['quick'] else ''} --docs docs` (or a full run) on "
                  f"{c['date']}, {c['cores']} cores; load average {c['load_avg'][0]} at the "
                  f"start, {c['load_avg'][1]} at the end (11 workers burn CPU on them).")
    met = "; ".join(f"{name.removeprefix('cost: ')}: {measured} ({'met' if ok else 'missed'})"
                    for name, measured, ok in targets(c))
    rows = []
    for r in c["runs"]:
        timed = r["deadline_s"] is not None
        rows.append([f"{r['deadline_s']:.1f} s" if timed else "none", f"{r['makespan_s']:.2f} s",
                     ("yes" if r["met"] else "no") if timed else f"{r['optimum_s']:.2f} s (T*)",
                     f"${r['cost']:.4f}", f"${r['optimum_cost']:.4f}" if timed else "–",
                     f"{r['cost_over_optimum']:.3f}" if timed else
                     f"{r['makespan_over_optimum']:.3f} × T*",
                     ", ".join(f"{n} {k}" for n, k in sorted(r["tasks_by_worker"].items()))])
    out = ["## Cost-aware placement under deadlines", "", intro, "", f"Targets: {met}.", ""]
    out += table(["deadline", "makespan", "met", "spend", "least cost", "÷ optimum",
                  "tasks per worker"], rows)
    return out + [""]


def write_doc(c: dict[str, Any], folder: Path) -> None:
    """The cost section's block of ``folder/BENCHMARKS.md``."""
    import report

    write_block(folder, "cost", section(c, report._table))


def main(argv: list[str] | None = None) -> int:
    """Run the section alone (a private redis-server); its JSON and doc block if asked."""
    return section_main("benchmarks/cost.py", __doc__, run_section, write_doc, targets, argv,
                        quick_help="one fleet", repeats_help="fleets [default: 1 quick, else 2]")


if __name__ == "__main__":
    sys.exit(main())
