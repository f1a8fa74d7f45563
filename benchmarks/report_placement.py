"""The placement section of ``docs/BENCHMARKS.md`` and its targets (benchmarks/placement.py).

The section is a kept block (``<!-- keep:placement -->``), like the gateway's and the soak's:
``benchmarks/run.py --only placement --docs docs`` rewrites it without a full run, and a later
run without placement keeps it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

NA = "—"


def targets(p: dict[str, Any] | None) -> list[tuple[str, Any, Any]]:
    """(target, measured, met) rows; met None when the section did not run."""
    rows: list[tuple[str, Any, Any]] = []
    f = p and p.get("fair")
    rows.append(("fair share: each of 3 active owners within ±10 % of 1/3 (one 10× backlogged)",
                 f and ", ".join(f"{o} {100 * x:.1f} %" for o, x in f["fractions"].items()),
                 f and f["max_deviation"] <= 0.10))
    rows.append(("a newcomer's job starts within one task time",
                 f and f"{f['late_start_s']:.2f} s (task {f['task_s']:g} s)",
                 f and f["late_start_s"] <= f["task_s"]))
    w = p and p.get("warm")
    rows.append(("two models, 4 workers: loads ≤ workers × models, makespan ≤ 1.10 × sticky",
                 w and f"{w['model_loads']} loads, {w['makespan_over_sticky']:.3f} × sticky",
                 w and w["model_loads"] <= w["workers"] * w["models"]
                 and w["makespan_over_sticky"] <= 1.10))
    rows.append(("Redis time per claim, 100 workers, 50 jobs, 10 owners ≤ 200 µs",
                 p and (f"{p['fair_claim_us']:.0f} µs" + (
                     f" (one owner {p['plain_claim_us']:.0f} µs, policy scan "
                     f"{p['policy_scan_us']:.0f} µs, same run)" if "plain_claim_us" in p else "")),
                 p and p["fair_claim_us"] <= 200))
    return rows


def section(p: dict[str, Any]) -> list[str]:
    """The section's text."""
    f, w, c = p.get("fair"), p.get("warm"), p.get("cost")
    out = ["## 6. Placement (fair share, warm models, claim cost)", ""]
    if f:
        out += [("**Fair share.** 3 synthetic workers; owners alice (10× the work), bob and "
                 "carol with equal shares, all queued at once; while all three have pending "
                 "work, each one's share of the worker-seconds committed: "
                 + ", ".join(f"{o} {100 * x:.1f} %" for o, x in f["fractions"].items())
                 + f" (largest deviation from 1/3: {100 * f['max_deviation']:.1f} %). A fourth "
                 f"owner's 20-task job arrived mid-run: its first task started after "
                 f"{f['late_start_s']:.2f} s (a task takes {f['task_s']:g} s) and it finished in "
                 f"{f['late_finish_s']:.1f} s, against {f['late_fair_finish_s']:.1f} s at a fair "
                 "quarter of the pool."), ""]
    if w:
        free, sticky = w["runs"]["free"], w["runs"]["sticky"]
        out += [(f"**Warm models.** 4 txt2img workers (CPU), two jobs of {w['tasks_per_job']} "
                 "64×64 images of two different tiny random-weight models (`make-model`: their "
                 "load time is real), queued together. Free placement: "
                 f"{free['makespan_s']:.2f} s, {free['model_loads']} model loads; each worker "
                 f"sticking to one model (labels and requirements): {sticky['makespan_s']:.2f} "
                 f"s, {sticky['model_loads']} loads; free ÷ sticky "
                 f"{w['makespan_over_sticky']:.3f}."), ""]
    else:
        out += ["**Warm models.** Not run (torch and diffusers are not installed).", ""]
    if c:
        out += [(f"**Claim cost.** Redis time per claim (`INFO commandstats`, the script and "
                 f"every command it runs) with {c['workers']} workers, {c['jobs']} jobs of "
                 f"{c['owners']} owners (the fair-share path): {p['fair_claim_us']:.0f} µs "
                 f"(median of the repeats; Redis CPU {c['fair_claim']['cpu_us_per_call']:.0f} "
                 "µs per call in the last)."
                 + (f" Side by side in each repeat, with the same 100 workers: a deep-queue "
                    f"claim of one owner's job {p['plain_claim_us']:.0f} µs, the policy scan of "
                    f"a slow worker facing a short queue {p['policy_scan_us']:.0f} µs; fair ÷ "
                    f"one owner {p['fair_over_plain']:.2f}, fair ÷ policy scan "
                    f"{p['fair_over_scan']:.2f} (medians of the repeats' ratios)."
                    if "plain_claim_us" in p else "")), ""]
    return out


def write_doc(p: dict[str, Any], machine: dict[str, Any], folder: Path) -> None:
    """The placement block of ``folder/BENCHMARKS.md``: the section, then its targets."""
    import report
    from docsection import put_block

    rows = [[name, NA if measured is None else str(measured),
             NA if met is None else ("**met**" if met else "**missed**")]
            for name, measured, met in targets(p)]
    when = (f"Measured by `python benchmarks/run.py --only placement --docs docs` (or a full "
            f"run) on {machine.get('date', NA)}; 1-minute load average "
            f"{machine.get('load_avg_start', NA)} at the start of the run, on "
            f"{machine.get('cores', NA)} cores.")
    lines = section(p)
    lines[1:1] = ["", when]
    lines += ["Targets of this section:", "", *report._table(["target", "measured", "met"], rows)]
    folder.mkdir(parents=True, exist_ok=True)
    put_block(folder / "BENCHMARKS.md", "placement", "\n".join(lines))
