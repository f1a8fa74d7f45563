"""``docs/BENCHMARKS.md`` from a run's results: targets (met / missed), machine, how to
rerun, one table per section, and the plots."""

from __future__ import annotations

from typing import Any

import cost as cost_bench
import gateway as gateway_bench
import latency
import report_gray
import report_placement
import report_throughput
import verify as verify_bench
from benchlib import median
from optimum import optimal_makespan
from reportlib import NA
from reportlib import fmt as _f
from reportlib import table as _table


def targets(res: dict[str, Any]) -> list[dict[str, Any]]:
    """Each issue target with its measured value and whether it was met (None: not run)."""
    s = res.get("scheduling")
    rows = []

    def add(name: str, section: Any, value: Any, met: Any) -> None:
        rows.append({"target": name, "measured": value if section else NA,
                     "met": met if section else None})

    _makespan_targets(s, add)
    g = s and s.get("gray")
    for name, measured, met in report_gray.targets(s or {}, g):
        add(name, g and measured, measured, met)  # no figure: a run before the scenario
    add("backups waste ≤ 5 % of task-seconds (no failures)", s and "backup_waste_fraction" in s,
        s and "backup_waste_fraction" in s and f"{100 * s['backup_waste_fraction']:.1f} %",
        s and s.get("backup_waste_fraction", 1) <= 0.05)
    add("FIFO makespan ≥ 3 × nova-queue's", s, s and f"{s['fifo_over_nova']:.2f} ×",
        s and s["fifo_over_nova"] >= 3)
    _other_targets(res, add)
    return rows


def _makespan_targets(s: dict[str, Any] | None, add: Any) -> None:
    """The scheduling's makespan targets: no kills, the fastest worker killed, a late
    joiner."""
    add("makespan ≤ 1.03 × T* (no kills)", s, s and f"{s['makespan_over_optimum']:.3f} × T*",
        s and s["makespan_over_optimum"] <= 1.03)
    add("makespan ≤ 1.15 × T* (fastest worker killed)", s,
        s and f"{s['kill_makespan_over_optimum']:.3f} × T*",
        s and s["kill_makespan_over_optimum"] <= 1.15)
    add("late joiner: makespan ≤ 1.10 × T*", s,
        s and f"{s['late_makespan_over_optimum']:.3f} × T*",
        s and s["late_makespan_over_optimum"] <= 1.10)


def _scale_targets(c: dict[str, Any] | None, add: Any) -> None:
    """The scale section's: 100k and 1M tasks enqueued (1M is not run by --quick), memory."""
    add("100k tasks enqueued in < 1 s", c, c and f"{c['enqueue_100k_s']:.2f} s",
        c and c["enqueue_100k_s"] < 1)
    m = c and next((x for x in c["rows"] if x["tasks"] == 1_000_000), None)
    add("1M tasks enqueued in < 5 s", m,
        m and f"{m['seconds']:.2f} s (Lua {m['redis_script_s']:.2f} s)", m and m["seconds"] < 5)
    add("≤ 300 B of Redis memory per task beyond its payload", c,
        c and f"{c['redis_bytes_per_task']:.0f} B", c and c["redis_bytes_per_task"] <= 300)


def _other_targets(res: dict[str, Any], add: Any) -> None:
    """The targets of throughput, recovery, scale, placement, the gateway and the soak."""
    t, r, c = (res.get(k) for k in ("throughput", "recovery", "scale"))
    add("protocol loop ≥ 10 × RQ SimpleWorker (best ÷ best)", t, t and (
        f"{t['nova_over_rq']:.1f} × (paired per repeat at 1 / 2 / 4 processes: "
        + " / ".join(f"{row['nova_over_rq']:.1f}" for row in t["rows"]) + ")"),
        t and t["nova_over_rq"] >= 10)
    for name, measured, met in report_throughput.targets(t):
        add(name, t, measured, met)
    add("recovery ≤ TTL + 1 s (every run)", r, r and ", ".join(
        f"{m:.2f} s @ {ttl:g} s" for ttl, m in zip(r["lease_ttl_s"], r["max_recovery_s"])),
        r and all(m <= ttl + 1 for ttl, m in zip(r["lease_ttl_s"], r["max_recovery_s"])))
    _scale_targets(c, add)
    p = res.get("placement")
    for name, measured, met in report_placement.targets(p):
        add(name, p, measured, met)
    for key, section_targets in (("gateway", gateway_bench.targets), ("latency", latency.targets),
                                 ("verify", verify_bench.targets), ("cost", cost_bench.targets)):
        for name, measured, met in section_targets(res.get(key)):
            add(name, res.get(key), measured, met)
    k = res.get("soak")
    add("soak: Redis memory grows ≤ 5 % after warm-up", k,
        k and (f"{k['memory_growth_after_warmup_pct']:+.1f} % (keys "
               f"{k['keys_growth_after_warmup_pct']:+.1f} %) at "
               f"{k['tasks_per_s_after_warmup']:.1f} tasks/s"),
        k and k["memory_growth_after_warmup_pct"] <= 5)


def _fifo_bound(s: dict[str, Any]) -> str:
    """Why FIFO ÷ nova is bounded on this fleet, from the measured FIFO runs."""
    fifo = [r for r in s["runs"] if (r["policy"], r["scenario"]) == ("fifo", "base")]
    if not fifo:
        return ""
    names = [w["name"] for w in fifo[0]["workers"]]
    t = [median([next(w for w in r["workers"] if w["name"] == name)["per_task_s"] for r in fifo])
         for name in names]
    n = s["config"]["n_tasks"]
    t_slow = max(t)
    opt = optimal_makespan([0.0] * len(t), t, n)
    n_max = max((k for k in range(1, n + 1)
                 if 3 * optimal_makespan([0.0] * len(t), t, k) <= t_slow), default=0)
    return (f"FIFO hands every free worker a task at once, so its makespan is at least the "
            f"slowest worker's one task, {t_slow:.1f} s here, while T* for {n} tasks is "
            f"{opt:.1f} s: even a perfect scheduler beats FIFO by at most about "
            f"{t_slow / opt:.1f}× on this fleet. A 3× gap needs a job of at most {n_max} tasks "
            f"(3·T* ≤ {t_slow:.1f} s) or a slower slow class: it is a property of the fleet "
            f"and N, not of the scheduler.")


def _scheduling(s: dict[str, Any]) -> list[str]:
    cfg = s["config"]
    fleet = (f"Fleet: {'; '.join(f['label'] for f in s['fleet'])} — one real worker process "
             f"each (`--slowdown` 1, 1.5, 10, 80). {cfg['n_tasks']} tasks of {cfg['ref_s']:g} "
             f"reference seconds ± {cfg['jitter']:.0%} (uniform, seeded, identical for every "
             f"policy; the scheduler only sees the nominal cost). Lease TTL "
             f"{cfg['lease_ttl_s']:g} s, heartbeat every {cfg['lease_ttl_s'] / 5:g} s.")
    definitions = (
        "**Definitions.** Each run first starts its workers and waits until every one is "
        "ready (nova-queue: registered, after its startup benchmark; baselines: after the "
        "same torch import, backend self-test and matmul timing). t0 is the instant the "
        "first task is enqueued; **makespan = last result committed − t0**, for every "
        "policy. Per worker, c_i = max(0, ready − t0) (non-zero only for the late worker) "
        "and t_i = its mean task service time (leased/popped → result committed, PNG upload "
        "included). **T\\*** is the exact optimum for those (c_i, t_i): the smallest T with "
        "Σ_i ⌊(T − c_i)⁺ / t_i⌋ ≥ N (a killed worker counts only tasks it finishes before "
        "the kill). A queue's own delays — noticing new work, claim round trips, recovering "
        "a lost lease — are not in (c_i, t_i), so they show in makespan ÷ T\\*.")
    static = (" (computed from the FIFO run's c_i, t_i: `--quick`)"
              if s["static_computed"] else "")
    policies = (
        "Policies: **nova** — real `nova-queue worker` processes; **fifo** — each worker "
        "pops the next task from one Redis list when free (what RQ does); **rq** — real RQ "
        "`SimpleWorker`s, same work per task; **static** — each worker gets N/4 tasks up "
        f"front{static}. Scenarios: **kill** — the 1× worker is `kill -9`ed when "
        f"{cfg['kill_fraction']:.0%} of the tasks are done; **late** — the 1× worker's process "
        f"is held back and joins ~{cfg['late_s']:g} s after t0 (its imports done beforehand, "
        "so it joins equally late in every policy).")
    out = ["## 1–2. Scheduling quality (nova-queue, FIFO pull, RQ, static split)", "",
           fleet, "", definitions, "", policies, ""]
    header = ["policy", "scenario", "runs", "makespan (s)", "T* (s)", "÷ T*",
              "tasks per worker (1× / 1.5× / 10× / 80×)"]
    rows = []
    seen = []
    for r in s["runs"]:
        key = (r["policy"], r["scenario"])
        if key in seen:
            continue
        seen.append(key)
        runs = [x for x in s["runs"] if (x["policy"], x["scenario"]) == key]
        counts = " / ".join(str(w["tasks"]) for w in runs[-1]["workers"])
        rows.append([key[0] + (" (model)" if runs[0]["computed"] else ""), key[1],
                     str(len(runs)), _f(median([x["makespan_s"] for x in runs])),
                     _f(median([x["optimum_s"] for x in runs])),
                     _f(median([x["makespan_over_optimum"] for x in runs]), ".3f"), counts])
    out += _table(header, rows)
    out += [(f"Side by side (medians of per-repeat ratios): FIFO ÷ nova = "
             f"{s['fifo_over_nova']:.2f}, RQ ÷ nova = {s['rq_over_nova']:.2f}, static ÷ nova = "
             f"{s['static_over_nova']:.1f}, FIFO-late ÷ nova-late = "
             f"{s['fifo_late_over_nova_late']:.2f}."), ""]
    pickup = _pickup(s)
    if pickup is not None:
        out += [(f"Pickup latency (t0 → a nova worker's first lease, median over the workers "
                 f"that got tasks in the base runs): {pickup:.3f} s."), ""]
    out += [_fifo_bound(s), "", "![makespan by policy](bench-makespan.png)", ""]
    return out + report_gray.section(s)


def _pickup(s: dict[str, Any]) -> float | None:
    firsts = [w["first_s"] for r in s["runs"] if (r["policy"], r["scenario"]) == ("nova", "base")
              for w in r["workers"] if w["first_s"] is not None and w["tasks"]]
    return median(firsts) if firsts else None


def _scale(c: dict[str, Any]) -> list[str]:
    intro = (
        "One job of N tasks (input `task <i>`, cost 1) via `NovaClient.enqueue` into an "
        "emptied Redis; time = the client call's wall time (validation, argument packing, "
        "the chunked Lua calls); Lua time = EVALSHA usec. Memory per task = `used_memory` "
        "delta ÷ N − mean input bytes; the task hash (`MEMORY USAGE`, 200 sampled) and the "
        "pending-set entry show where it goes. Last column: a 20k-task job (two chunks: "
        "staged, then published) enqueued on top of the N-task backlog.")
    out = ["## 4. Scale: enqueue and memory", "", intro, ""]
    out += _table(["tasks", "runs", "seconds (median / best)", "tasks/s", "Lua time (s)",
                   "B/task beyond payload", "task hash B", "pending entry B",
                   "20k job onto it (s)"],
                  [[f"{r['tasks']:,}", str(r["repeats"]),
                    f"{r['seconds']:.3f} / {r['best_seconds']:.3f}",
                    _f(r["tasks_per_s"], ",.0f"), _f(r["redis_script_s"], ".3f"),
                    _f(r["bytes_per_task_beyond_payload"], ".0f"), _f(r["task_hash_bytes"], ".0f"),
                    _f(r["pending_entry_bytes"], ".0f"), _f(r.get("onto_backlog_s"))]
                   for r in c["rows"]])
    return out


def _recovery(r: dict[str, Any]) -> list[str]:
    intro = (
        "Two real workers (`--no-benchmark`), one long task; the holder is `kill -9`ed at a "
        "random point between two heartbeats. Recovery = the task's next `claimed` event − "
        "the kill; detection = its `requeued` event − the kill (the other worker's claim "
        f"reaps the lost worker lazily). {r['repeats']} run(s) per TTL.")
    out = ["## 5. Recovery", "", intro, ""]
    out += _table(["lease TTL (s)", "heartbeat (s)", "recovery median (s)", "recovery max (s)",
                   "detection median (s)", "target TTL + 1 s"],
                  [[_f(x["lease_ttl_s"], "g"), _f(x["heartbeat_s"], "g"), _f(x["recovery_s"]),
                    _f(x["max_recovery_s"]), _f(x["detection_s"]),
                    "met" if x["max_recovery_s"] <= x["lease_ttl_s"] + 1 else "missed"]
                   for x in r["rows"]])
    out += ["![recovery](bench-recovery.png)", ""]
    return out


def _floor_note(t: dict[str, Any]) -> str:
    f = t.get("round_trip_floor")
    if not f:
        return ""
    return (f": an EVALSHA round trip of `return 1` alone takes {f['wall_us_per_call']:.0f} µs "
            f"and {f['client_cpu_us_per_call']:.0f} µs of client CPU through redis-py here, and "
            "with several processes on this machine's cores, clients and Redis share the CPUs")


#: What moved the targets this benchmark missed, measured side by side with
#: ``benchmarks/ab.py REV`` (REV vs the new code, alternated 3 times, medians). History,
#: kept here by hand: every other number in the document is from the run that wrote it.
WHAT_MOVED = (
    ("2026-11-30", "27d51a8 → complete_claim",
     ("the commit of a claim's last task also claims the next tasks in the same script "
      "(`complete_claim-15`, used by the worker loop): one round trip per task instead of two; "
      "claim and complete read and write a job's counts once per call"),
     [("no-op tasks/s, 1 process", "1619", "2561", "1.58×"),
      ("no-op tasks/s, 4 processes", "3553", "5010", "1.41×")]),
    ("2026-11-30", "27d51a8 → batched enqueue",
     ("enqueue adds pending-set entries 1000 per ZADD, derives a task's seq from its job "
      "instead of storing it, and packs the next chunk while Redis runs the one before"),
     [("enqueue of 100k tasks (s)", "1.264", "0.982", "0.78×")]),
)


def _what_moved() -> list[str]:
    out = ["## What moved the missed targets", "",
           ("Measured side by side with `python benchmarks/ab.py REV` (the old revision and the "
            "new code alternated 3 times on this machine, each with its own redis-server; "
            "medians). Kept by hand as history; the tables above are this run's."), ""]
    rows = []
    for date, revs, what, figures in WHAT_MOVED:
        for i, (measure, before, after, ratio) in enumerate(figures):
            rows.append([date if i == 0 else "", revs if i == 0 else "", what if i == 0 else "",
                         measure, before, after, ratio])
    return out + _table(["date", "revisions", "change", "measure", "before", "after",
                         "after ÷ before"], rows)


def _where_time_goes(res: dict[str, Any]) -> list[str]:
    """Measured decompositions behind the missed targets (numbers from this run)."""
    notes = []
    s, t, c = res.get("scheduling"), res.get("throughput"), res.get("scale")
    if s and s["makespan_over_optimum"] > 1.03:
        pickup = _pickup(s)
        notes.append(f"- Makespan ÷ T* {s['makespan_over_optimum']:.3f}: the workers took their "
                     f"first task a median {pickup or 0:.2f} s after t0 — time in no (c_i, t_i).")
    if s and s["fifo_over_nova"] < 3:
        notes.append("- FIFO ÷ nova: see the bound under the scheduling table.")
    if t and t["nova_over_rq"] < 10:
        cost = t["redis_cost"][0]
        if "commit_claim" in cost:
            redis_us, what = cost["commit_claim"]["cpu_us_per_call"], "one commit-and-claim call"
        else:
            redis_us = cost["claim"]["cpu_us_per_call"] + cost["commit"]["cpu_us_per_call"]
            what = "claim + commit"
        per_task_us = 1e6 / t["rows"][0]["nova_tasks_per_s"]
        notes.append(f"- Throughput: one process spends {per_task_us:.0f} µs per task, of which "
                     f"Redis {redis_us:.0f} µs ({what}, {cost['workers']} workers) and the rest "
                     "the client" + _floor_note(t) + ".")
    bull = t and report_throughput.where_time_goes(t)
    if bull:
        notes.append(bull)
    if c and c["enqueue_100k_s"] >= 1:
        row = next(x for x in c["rows"] if x["tasks"] == 100_000)
        notes.append(f"- Enqueue of 100k: {row['seconds']:.2f} s, of which "
                     f"{row['redis_script_s']:.2f} s inside the Lua scripts, the rest in the "
                     f"client.")
    return ["## Where the time goes (missed targets)", "", *notes, ""] if notes else []


def markdown(res: dict[str, Any]) -> str:
    """The whole document."""
    m = res["machine"]
    mode = "quick (`--quick`)" if res["quick"] else "full"
    intro = (f"Generated by `python benchmarks/run.py{' --quick' if res['quick'] else ''} "
             "--docs docs` "
             f"on {m['date']} ({mode} run, {res['duration_s'] / 60:.1f} min). Do not edit by "
             "hand: rerun it. Ratios are measured side by side in one run (policies and "
             "repeats interleaved); absolute times on this machine are noisy.")
    for name, how in (res.get("later") or {}).items():  # merged by hand, said so here
        intro += (f" The {name} section's figures (its block and its targets) are from a "
                  f"later run: {how}.")
    top = report_throughput.headline(res.get("throughput"))
    out = ["# Benchmarks", "", intro, "", *([top, ""] if top else []), "## Targets", ""]
    out += _table(["target", "measured", "met"],
                  [[x["target"], str(x["measured"]),
                    NA if x["met"] is None else ("**met**" if x["met"] else "**missed**")]
                   for x in targets(res)])
    rerun = ("It starts its own `redis-server` (newest on PATH; `NOVA_BENCH_REDIS_SERVER` picks "
             "one) and real worker processes, and prints the targets. It writes files only when "
             "asked: `--json OUT` the numbers, `--docs DIR` this document and its plots "
             "(`--docs docs` rewrites this file; blocks other scripts keep here stay). The "
             "throughput section runs BullMQ beside nova-queue and RQ when `node` and `npm` are "
             "on PATH (npm installs the pinned bullmq and ioredis once, into a folder in the "
             "system temp directory); without them it runs without BullMQ and says so.")
    out += ["## Machine", "",
            f"- CPU: {m['cpu']}, {m['cores']} cores; RAM {m['ram_gib']} GiB; {m['os']}",
            (f"- Python {m['python']}, Redis {m['redis']} (a private redis-server on a free "
             f"port, no persistence), redis-py {m['redis_py']} "
             f"({'with' if m.get('hiredis') else 'without'} hiredis), rq {m['rq']}"),
            f"- nova-queue from `{res['nova_queue_path']}`",
            (f"- 1-minute load average {m.get('load_avg_start', NA)} at the start, "
             f"{m.get('load_avg_end', NA)} at the end (on {m['cores']} cores: other work on the "
             "machine slows everything; ratios hold better than absolute times)"), "",
            "## How to rerun", "",
            "```",
            "python benchmarks/run.py --quick                          # a few minutes, numbers only",
            "python benchmarks/run.py --json bench.json                # full: repeats, 1M tasks",
            "python benchmarks/run.py --only scale --json scale.json   # one section",
            "python benchmarks/run.py --json bench.json --docs docs    # full, and rewrite this file",
            "python benchmarks/run.py --from-json bench.json --docs docs  # re-render this file",
            "python benchmarks/ab.py HEAD~3                            # a revision vs the tree",
            "python benchmarks/claim_instructions.py                   # instructions per claim (callgrind)",
            "```", "", rerun, ""]
    for key, fn in (("scheduling", _scheduling), ("throughput", report_throughput.section),
                    ("scale", _scale), ("recovery", _recovery)):  # the rest: kept blocks
        if key in res:
            out += fn(res[key])
    out += _where_time_goes(res)
    out += _what_moved()
    return "\n".join(out).rstrip() + "\n"
