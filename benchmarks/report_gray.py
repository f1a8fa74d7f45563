"""The gray-failure part of ``docs/BENCHMARKS.md``'s scheduling section and its targets
(benchmarks/gray.py): one worker of the mixed fleet misbehaves, or a phantom lies."""

from __future__ import annotations

from typing import Any

from benchlib import median
from reportlib import fmt as _f
from reportlib import table as _table


def targets(s: dict[str, Any], g: dict[str, Any] | None) -> list[tuple[str, Any, Any]]:
    """(target, measured, met) rows of the gray scenarios; measured and met falsy when the
    section did not run (``g`` None), or a run predates the scenario."""
    phantom = bool(g) and "phantom_makespan_over_optimum" in s
    return [
        ("throttled 100× at half the job: makespan ≤ 1.15 × T*",
         g and f"{s['throttle_makespan_over_optimum']:.3f} × T*",
         g and s["throttle_makespan_over_optimum"] <= 1.15),
        ("a worker failing everything: 0 failed tasks, makespan ≤ 1.10 × the healthy T*",
         g and (f"{s['blackhole_failed_tasks']} failed, "
                f"{s['blackhole_makespan_over_optimum']:.3f} × T*"),
         g and s["blackhole_failed_tasks"] == 0 and s["blackhole_makespan_over_optimum"] <= 1.10),
        ("a hung task committed elsewhere ≤ timeout + TTL + 1 s",
         g and (f"{s['hang_recovery_s']:.2f} s (timeout {g['hang_timeout_s']:g} s, "
                f"TTL {g['lease_ttl_s']:g} s)"),
         g and s["hang_recovery_s"] <= g["hang_timeout_s"] + g["lease_ttl_s"] + 1),
        ("a phantom (1e-9 s declared, never claims): makespan ≤ 1.03 × T*",
         phantom and f"{s['phantom_makespan_over_optimum']:.3f} × T*",
         phantom and s["phantom_makespan_over_optimum"] <= 1.03 if phantom else None),
    ]


def section(s: dict[str, Any]) -> list[str]:
    """The gray-failure scenarios (benchmarks/gray.py) and the base runs' backup waste."""
    g = s.get("gray")
    if not g:
        return []
    out = ["### Gray failures", "",
           ("The same fleet and tasks with one worker misbehaving (switched on through the "
            "synthetic app's control file): **throttle** — the 1× worker turns 100× slower "
            "at half the job (T\\* counts it until then); **blackhole** — the 1.5× worker "
            "fails every task at once from the start (T\\* of the healthy three); **hang** — "
            f"the 1× worker's tasks never return from a quarter of the job on (job time limit "
            f"{g['hang_timeout_s']:g} s; recovery: its first hung task's claim → that task's "
            "commit elsewhere); **phantom** — beside the healthy fleet, a worker registers a "
            "benchmark of 1e-9 s and keeps its heartbeat but never claims (T\\* of the "
            "healthy four). Backups started per run are counted from the event stream."), ""]
    rows = []
    for scenario in ("throttle", "blackhole", "hang", "phantom"):
        runs = [r for r in g["runs"] if r["scenario"] == scenario]
        if not runs:
            continue  # a run from before the scenario existed
        extra = ""
        if scenario == "blackhole":
            extra = f"failed tasks {max(r['failed_tasks'] for r in runs)}"
        elif scenario == "hang":
            extra = f"recovery {max(r['recovery_s'] for r in runs):.2f} s"
        rows.append([scenario, str(len(runs)), _f(median([r["makespan_s"] for r in runs])),
                     _f(median([r["optimum_s"] for r in runs])),
                     _f(median([r["makespan_over_optimum"] for r in runs]), ".3f"),
                     " / ".join(str(r["backups"]) for r in runs), extra])
    out += _table(["scenario", "runs", "makespan (s)", "T* (s)", "÷ T*", "backups per run",
                   ""], rows)
    if "backup_waste_fraction" in s:
        out += [(f"Backups in the base scenario (no failure): "
                 f"{100 * s['backup_waste_fraction']:.1f} % of task-seconds went to attempts "
                 "that lost a backup race (median over the base runs)."), ""]
    return out
