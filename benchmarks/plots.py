"""PNG plots of a benchmark run (matplotlib, Agg backend): makespan by policy, throughput
vs worker processes, recovery vs lease TTL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchlib import median


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _finish(plt: Any, fig: Any, ax: Any, title: str, path: Path) -> None:
    """Title and legend, then write the PNG (110 dpi) and free the figure."""
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def makespan_plot(sched: dict[str, Any], path: Path) -> None:
    """Median makespan and median T* per policy × scenario."""
    plt = _pyplot()
    order = [("nova", "base"), ("fifo", "base"), ("rq", "base"), ("static", "base"),
             ("nova", "kill"), ("nova", "late"), ("fifo", "late")]
    labels, spans, optima = [], [], []
    for policy, scenario in order:
        runs = [r for r in sched["runs"] if (r["policy"], r["scenario"]) == (policy, scenario)]
        if runs:
            computed = " (model)" if all(r["computed"] for r in runs) else ""
            labels.append(f"{policy}\n{scenario}{computed}")
            spans.append(median([r["makespan_s"] for r in runs]))
            optima.append(median([r["optimum_s"] for r in runs]))
    fig, ax = plt.subplots(figsize=(8, 4.2))
    colours = ["#2b7bba" if lab.startswith("nova") else "#d9822b" for lab in labels]
    xs = range(len(labels))
    ax.bar(xs, spans, color=colours, label="makespan")
    ax.scatter(xs, optima, color="black", marker="_", s=600, zorder=3, label="T* (optimum)")
    for x, s, o in zip(xs, spans, optima):
        ax.annotate(f"{s / o:.2f}×", (x, s), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(list(xs), labels, fontsize=8)
    ax.set_ylabel("seconds")
    ax.set_yscale("log")
    _finish(plt, fig, ax, "Makespan of 64 tasks on a 1× / 1.5× / 10× / 80× fleet (label: ÷ T*)",
            path)


def throughput_plot(tp: dict[str, Any], path: Path) -> None:
    """No-op tasks per second vs worker processes, nova-queue, RQ and (where it ran) BullMQ."""
    plt = _pyplot()
    rows = tp["rows"]
    procs = [r["processes"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(procs, [r["nova_tasks_per_s"] for r in rows], "o-", color="#2b7bba",
            label="nova-queue claim → commit")
    ax.plot(procs, [r["rq_jobs_per_s"] for r in rows], "s-", color="#d9822b",
            label="RQ SimpleWorker")
    for c, style in ((1, "^--"), (100, "v-")):
        if f"bullmq_c{c}_jobs_per_s" in rows[0]:
            ax.plot(procs, [r[f"bullmq_c{c}_jobs_per_s"] for r in rows], style, color="#6a3d9a",
                    label=f"BullMQ, concurrency {c}")
    ax.set_xticks(procs)
    ax.set_xlabel("worker processes")
    ax.set_ylabel("tasks per second")
    ax.set_ylim(bottom=0)
    _finish(plt, fig, ax, "Lifecycle throughput, no-op tasks, one Redis", path)


def recovery_plot(rec: dict[str, Any], path: Path) -> None:
    """Recovery time (each run and median) vs lease TTL, with the TTL + 1 s target."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    ttls = rec["lease_ttl_s"]
    for row in rec["rows"]:
        ax.scatter([row["lease_ttl_s"]] * len(row["runs"]), [x["recovery_s"] for x in row["runs"]],
                   color="#2b7bba", alpha=0.5, s=18)
    ax.plot(ttls, rec["recovery_s"], "o-", color="#2b7bba", label="kill -9 → re-claimed (median)")
    ax.plot(ttls, [t + 1 for t in ttls], "--", color="grey", label="target: TTL + 1 s")
    ax.plot(ttls, ttls, ":", color="grey", label="TTL")
    ax.set_xlabel("lease TTL (s)")
    ax.set_ylabel("seconds")
    ax.set_xticks(ttls)
    _finish(plt, fig, ax, "Recovery of a killed worker's task", path)


def soak_plot(soak: dict[str, Any], path: Path) -> None:
    """Redis used_memory and key count over the soak, the end of the warm-up marked."""
    plt = _pyplot()
    samples = soak["samples"]
    ts = [s["t_s"] for s in samples]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(ts, [s["used_memory"] / 2**20 for s in samples], "o-", color="#2b7bba", ms=3,
            label="used_memory (MiB)")
    ax.set_xlabel("seconds")
    ax.set_ylabel("MiB")
    ax.set_ylim(bottom=0)
    keys = ax.twinx()
    keys.plot(ts, [s["keys"] for s in samples], "s-", color="#d9822b", ms=3, label="keys")
    keys.set_ylabel("keys")
    keys.set_ylim(bottom=0)
    ax.axvline(soak["config"]["warmup_s"], color="grey", linestyle="--", label="end of warm-up")
    ax.plot([], [], "s-", color="#d9822b", label="keys (right axis)")
    cfg = soak["config"]
    _finish(plt, fig, ax, f"Soak: {cfg['jobs_per_s']:g} jobs/s × {cfg['tasks_per_job']} tasks, "
            f"retention {cfg['retention_s']} s ({soak['memory_growth_after_warmup_pct']:+.1f} % "
            "after warm-up)", path)


def write_all(results: dict[str, Any], folder: Path) -> list[Path]:
    """Every plot whose section ran; returns the files written."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for key, fn, name in (("scheduling", makespan_plot, "bench-makespan.png"),
                          ("throughput", throughput_plot, "bench-throughput.png"),
                          ("recovery", recovery_plot, "bench-recovery.png"),
                          ("soak", soak_plot, "bench-soak.png")):
        if key in results:
            fn(results[key], folder / name)
            out.append(folder / name)
    return out
