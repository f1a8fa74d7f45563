"""The lifecycle-throughput section of ``docs/BENCHMARKS.md`` and its BullMQ targets
(benchmarks/throughput.py, benchmarks/bullmq.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reportlib import fmt as _f
from reportlib import table

BULL_CONCURRENCY = (1, 100)


def _nova_best(t: dict[str, Any]) -> dict[str, Any]:
    """The row of nova's best rate (runs before BullMQ have no top-level figure for it)."""
    return max(t["rows"], key=lambda row: row["nova_tasks_per_s"])


def _bull_note(t: dict[str, Any]) -> str:
    return (t.get("bullmq") or {}).get("note") or "BullMQ not run (a run before it was added)"


def targets(t: dict[str, Any] | None) -> list[tuple[str, Any, Any]]:
    """(target, measured, met) rows; met None when BullMQ or the section did not run."""
    rows: list[tuple[str, Any, Any]] = _worker_targets(t)
    if t and "nova_over_bullmq" in t:
        b = t["bullmq_best"]
        rows.append(("protocol loop (NovaClient, no app, no store) ≥ 1.0 × BullMQ (best ÷ best)",
                     (f"{t['nova_over_bullmq']:.2f} × ({t['nova_tasks_per_s']:.0f} ÷ "
                      f"{t['bullmq_jobs_per_s']:.0f} jobs/s, BullMQ at {b['processes']} "
                      f"process(es), concurrency {b['concurrency']})"),
                     t["nova_over_bullmq"] >= 1.0))
    else:
        rows.append(("protocol loop (NovaClient, no app, no store) ≥ 1.0 × BullMQ (best ÷ best)",
                     t and _bull_note(t), None))
    best = t and _nova_best(t)
    bull = (f"; BullMQ {t['bullmq_redis_cpu_us_per_job']:.0f} µs per job at its best"
            if t and "bullmq_redis_cpu_us_per_job" in t else "")
    rows.append(("Redis CPU ≤ 40 µs per task at the protocol loop's best configuration",
                 best and (f"{best['nova_redis_cpu_us_per_task']:.0f} µs ({best['processes']} "
                           f"process(es){bull})"),
                 best and best["nova_redis_cpu_us_per_task"] <= 40))
    return rows


def _worker_targets(t: dict[str, Any] | None) -> list[tuple[str, Any, Any]]:
    """The real workers' targets (runs before they were measured: n/a)."""
    w = t and t.get("worker")
    label = "real workers (`nova-queue worker`, no-op app) ≥ 1.0 × BullMQ's real Worker"
    if not w:
        return [(label, t and "not measured in this run", None),
                ("one real worker process ≥ 2,000 no-op tasks/s",
                 t and "not measured in this run", None)]
    ratio = t.get("nova_worker_over_bullmq")
    return [(label,
             (f"{ratio:.2f} × ({w['best_tasks_per_s']:.0f} ÷ {t['bullmq_jobs_per_s']:.0f} jobs/s; "
              f"nova at {w['best_processes']} process(es), concurrency "
              f"{w['best_concurrency']})") if ratio is not None else _bull_note(t),
             None if ratio is None else ratio >= 1.0),
            ("one real worker process ≥ 2,000 no-op tasks/s",
             f"{w['one_process_tasks_per_s']:.0f} tasks/s", w["one_process_tasks_per_s"] >= 2000)]


def headline(t: dict[str, Any] | None) -> str | None:
    """The document's headline: small tasks through what users run (real worker processes)
    beside BullMQ's real Worker, and the protocol loop labelled as the queue's ceiling; None
    for a run without real workers."""
    w = t and t.get("worker")
    if not w:
        return None
    out = (f"**Headline (what users run):** {w['best_processes']} real `nova-queue worker` "
           f"process(es) on a no-op app ran {w['best_tasks_per_s']:.0f} tasks/s, one process "
           f"{w['one_process_tasks_per_s']:.0f}")
    if "nova_worker_over_bullmq" in t:
        out += (f"; BullMQ's real Worker at its best {t['bullmq_jobs_per_s']:.0f} jobs/s in "
                f"the same run: **{t['nova_worker_over_bullmq']:.2f} ×**")
    best = _nova_best(t)
    return out + (f". The protocol loop (`NovaClient` claim → commit, no app, no store: the "
                  f"queue's ceiling, not the product's rate) ran {best['nova_tasks_per_s']:.0f}"
                  " tasks/s.")


def worker_section(t: dict[str, Any]) -> list[str]:
    """Small tasks through real worker processes: the product's own figure, beside BullMQ's
    real Worker of the same run (its kept block of BENCHMARKS.md)."""
    w = t["worker"]
    rows = [[str(r["processes"]), str(r["concurrency"]), _f(r["tasks_per_s"], ".0f"),
             _f(r["redis_cpu_us_per_task"], ".0f")] for r in w["rows"]]
    out = ["## Small tasks through real workers", "",
           (f"What a user runs: {w['how']}. {w['tasks']} tasks per point, {w['repeats']} "
            "repeat(s), medians. The *lifecycle throughput* figures of section 3 are a protocol "
            "loop through `NovaClient` (no app, no store, claim 64 / commit 64): the queue's "
            "ceiling, not the product's rate."), "",
           *table(["processes", "concurrency", "tasks/s", "Redis CPU µs/task"], rows)]
    if "nova_worker_over_bullmq" in t:
        b = t["bullmq_best"]
        out += [(f"Best real nova workers ÷ best BullMQ Worker of the same run: "
                 f"{t['nova_worker_over_bullmq']:.2f}× ({w['best_tasks_per_s']:.0f} tasks/s ÷ "
                 f"{t['bullmq_jobs_per_s']:.0f} jobs/s, BullMQ at {b['processes']} "
                 f"process(es), concurrency {b['concurrency']})."), ""]
    else:
        out += [_bull_note(t) + ".", ""]
    return out


def write_worker_doc(t: dict[str, Any], folder: Path) -> None:
    """The real workers' block of ``folder/BENCHMARKS.md`` (written whenever the throughput
    section ran, ``--only throughput`` included)."""
    from docsection import put_block

    folder.mkdir(parents=True, exist_ok=True)
    put_block(folder / "BENCHMARKS.md", "worker-throughput", "\n".join(worker_section(t)))


def where_time_goes(t: dict[str, Any]) -> str | None:
    """Redis CPU per task and Redis's busy share of one core, nova's best against BullMQ's
    (a note for a missed nova ÷ BullMQ target), or None."""
    if t.get("nova_over_bullmq", 1.0) >= 1.0:
        return None
    best, b = _nova_best(t), t["bullmq_best"]
    nova_us, bull_us = best["nova_redis_cpu_us_per_task"], t["bullmq_redis_cpu_us_per_job"]
    return (f"- nova ÷ BullMQ {t['nova_over_bullmq']:.2f}: Redis spends {nova_us:.0f} µs of "
            f"CPU per nova task at nova's best and {bull_us:.0f} µs per BullMQ job at its best "
            f"({nova_us / bull_us:.1f}×; concurrency {b['concurrency']}); Redis is busy "
            f"{t['nova_tasks_per_s'] * nova_us / 1e4:.0f} % of one core during nova's run, "
            f"{t['bullmq_jobs_per_s'] * bull_us / 1e4:.0f} % during BullMQ's (scripts and commands "
            "per task: under the throughput table).")


def _intro(t: dict[str, Any]) -> list[str]:
    loop = t.get("loop", "claim, then complete")
    b = t.get("bullmq") or {}
    bull = (f" BullMQ {b['bullmq']} (ioredis {b['ioredis']}, Node {b['node']}): P processes, "
            "each one `Worker` with concurrency 1 or 100, on no-op jobs added beforehand with "
            "`addBulk` (BullMQ's defaults otherwise: completed jobs kept, stalled checks on), "
            "on the same redis-server (`benchmarks/bullmq_bench.js`); rate = jobs ÷ (last "
            f"completion − first start); {t['tasks']['bullmq']} jobs per point."
            if b.get("available") else f" {_bull_note(t)}.")
    return [(
        "No-op tasks. nova-queue: P processes, each a registered worker looping "
        f"claim → commit through `NovaClient` ({loop}; a worker's per-task queue "
        "work, without the app and the upload). RQ: P `SimpleWorker` processes on no-op jobs. "
        "Rate = tasks ÷ (last commit − first claim); process start-up excluded; "
        f"{t['tasks']['nova']} nova tasks / {t['tasks']['rq']} RQ jobs per point." + bull
        + f" {t['repeats']} repeat(s), interleaved, medians. Redis CPU per task = the "
        "redis-server process's CPU time over the run ÷ tasks (RQ's includes its enqueue; "
        "BullMQ's is from the start signal, after its addBulk)."), ""]


def _rates(t: dict[str, Any]) -> list[str]:
    bull = "bullmq_c1_jobs_per_s" in t["rows"][0]
    header = ["processes", "nova tasks/s", "RQ jobs/s"]
    header += [f"BullMQ c={c} jobs/s" for c in BULL_CONCURRENCY] if bull else []
    header += ["nova ÷ RQ"] + (["nova ÷ BullMQ"] if bull else [])
    header += ["Redis CPU µs/task (nova)", "Redis CPU µs/job (RQ)"]
    header += [f"Redis CPU µs/job (BullMQ c={c})" for c in BULL_CONCURRENCY] if bull else []
    rows = []
    for r in t["rows"]:
        row = [str(r["processes"]), _f(r["nova_tasks_per_s"], ".0f"), _f(r["rq_jobs_per_s"], ".0f")]
        row += [_f(r[f"bullmq_c{c}_jobs_per_s"], ".0f") for c in BULL_CONCURRENCY] if bull else []
        row += [_f(r["nova_over_rq"], ".1f")] + ([_f(r["nova_over_bullmq"])] if bull else [])
        row += [_f(r["nova_redis_cpu_us_per_task"], ".0f"), _f(r["rq_redis_cpu_us_per_job"], ".0f")]
        row += [_f(r[f"bullmq_c{c}_redis_cpu_us_per_job"], ".0f")
                for c in BULL_CONCURRENCY] if bull else []
        rows.append(row)
    out = table(header, rows)
    vs_bull = ("; *nova ÷ BullMQ* against BullMQ's better concurrency in that repeat"
               if bull else "")
    out += [(f"Best nova ÷ best RQ: {t['nova_over_rq']:.1f}× (the two best medians, which may "
             "come from different repeats; the *÷* columns pair the runs of one repeat, side by "
             f"side, and take the median{vs_bull}). The targets are judged on best ÷ best."), ""]
    if "nova_over_bullmq" in t:
        b, best = t["bullmq_best"], _nova_best(t)
        out += [(f"Best nova ÷ best BullMQ: {t['nova_over_bullmq']:.2f}× (nova "
                 f"{t['nova_tasks_per_s']:.0f} tasks/s at {best['processes']} process(es), Redis "
                 f"CPU {best['nova_redis_cpu_us_per_task']:.0f} µs per task; BullMQ "
                 f"{t['bullmq_jobs_per_s']:.0f} jobs/s at {b['processes']} process(es), "
                 f"concurrency {b['concurrency']}, Redis CPU "
                 f"{t['bullmq_redis_cpu_us_per_job']:.0f} µs per job)."), ""]
    if "nova_k1_over_bullmq" in t:
        out += [(f"One task per call (complete_and_claim at k=1, side by side): best "
                 f"{t['nova_k1_tasks_per_s']:.0f} tasks/s, {t['nova_k1_over_bullmq']:.2f}× "
                 f"BullMQ's best, Redis CPU {t['nova_k1_redis_cpu_us_per_task']:.0f} µs per "
                 "task."), ""]
    return out


def _split(t: dict[str, Any]) -> list[str]:
    """Scripts and commands per task and the time inside the scripts, per queue and process
    count."""
    if "nova_redis_script_us_per_task" not in t["rows"][0]:
        return []
    queues = [("nova-queue", "nova_", "task")]
    if "bullmq_c1_redis_script_us_per_job" in t["rows"][0]:
        queues += [(f"BullMQ c={c}", f"bullmq_c{c}_", "job") for c in BULL_CONCURRENCY]
    rows = [[name, str(r["processes"]), _f(r[f"{pre}redis_cpu_us_per_{unit}"], ".0f"),
             _f(r[f"{pre}scripts_per_{unit}"]),
             _f(r.get(f"{pre}redis_commands_per_{unit}"), ".1f"),
             _f(r[f"{pre}redis_script_us_per_{unit}"], ".0f")]
            for name, pre, unit in queues for r in t["rows"]]
    return [("What Redis does per task (`INFO commandstats`, reset at each run's start): Lua "
             "scripts run (EVALSHA and EVAL) and commands run, those the scripts call included "
             "(the harness's INFO and CONFIG not; BullMQ's include its driver's completed-count "
             "poll, every 20 ms). The time inside the scripts is commandstats' usec, a wall "
             "clock: when other processes preempt Redis mid-script (a loaded machine) it "
             "exceeds the CPU time, so compare it across queues, not with the CPU column."), "",
            *table(["queue", "processes", "Redis CPU µs/task", "scripts per task",
                    "commands per task", "inside scripts µs/task (wall)"], rows)]


def _costs(t: dict[str, Any]) -> list[str]:
    out = []
    f = t.get("round_trip_floor")
    if f:
        out += [(f"Round-trip floor: an EVALSHA of `return 1` through redis-py takes "
                 f"{f['wall_us_per_call']:.0f} µs (client CPU {f['client_cpu_us_per_call']:.0f} "
                 "µs) on this machine; a queue with one round trip per task cannot beat it."), ""]
    out += [("Redis time per call (`INFO commandstats`: EVALSHA usec per call, the script and "
             "every command it runs; and the redis-server process's CPU per call). *claim*: a "
             "deep queue (fast path); *claim (policy scan)*: a slow worker facing 2 pending "
             "tasks, which reads every fleet member's predicted free time and answers WAIT."), ""]
    rows = []
    for c in t["redis_cost"]:
        for key, label in (("claim", "claim"), ("commit", "commit (complete)"),
                           ("commit_claim", "commit + next claim (complete_claim)"),
                           ("claim_wait", "claim (policy scan → WAIT)")):
            if key in c:
                rows.append([str(c["workers"]), label, _f(c[key]["usec_per_call"], ".0f"),
                             _f(c[key]["cpu_us_per_call"], ".0f")])
    return out + table(["registered workers", "call", "EVALSHA µs/call", "Redis CPU µs/call"],
                       rows)


def section(t: dict[str, Any]) -> list[str]:
    """The section's text."""
    return (["## 3. Lifecycle throughput", "", *_intro(t), *_rates(t), *_split(t), *_costs(t),
             "![throughput](bench-throughput.png)", ""])

