"""The soak: a steady stream of small jobs for several minutes on its own redis-server, with
a short retention, real worker processes, and Redis's ``used_memory`` and key count sampled
over time. After a warm-up (jobs start expiring as fast as new ones arrive, the event stream
reaches its MAXLEN) memory must stay flat: ``memory_growth_after_warmup_pct`` is the growth
from the end of the warm-up to the end (target ≤ 5 %), with the throughput held meanwhile.

``benchmarks/run.py --only soak`` runs it with the rest; on its own::

    python benchmarks/soak.py --json soak.json --doc docs   # 8 min; docs/BENCHMARKS.md's block
    python benchmarks/soak.py --from-json soak.json --doc docs

Its section of docs/BENCHMARKS.md is a kept block (``<!-- keep:soak -->``), rewritten by
whichever of the two ran a soak last, and its plot ``bench-soak.png``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # sibling modules, when run as a script
    sys.path.insert(0, str(HERE))

from benchlib import log, start_redis
from fleet import start_nova_worker, stop_all

from nova_queue import NovaClient, TaskSpec
from nova_queue.local import wait_for

#: Tasks per job, jobs enqueued per second (well under what two no-op workers commit, so the
#: queue does not build up: a growing backlog is memory the retention does not govern).
TASKS_PER_JOB = 4
JOBS_PER_S = 8.0
RETENTION_S = 15
#: The event stream's cap in the soak: it fills during the warm-up (at the default 100,000
#: it would take longer than a quick soak, and its growth is not the retention's).
EVENTS_MAXLEN = 5000
SAMPLE_EVERY_S = 5.0
WORKERS = 2


def _sample(client: NovaClient, started: float) -> dict[str, Any]:
    """One point: time, Redis memory and keys, tasks committed, backlog."""
    r = client.redis
    done = sum(w.tasks_done for w in client.workers())
    return {"t_s": round(time.monotonic() - started, 1), "used_memory": r.info("memory")[
        "used_memory"], "keys": r.dbsize(), "done": done,
        "pending": client.pending_count("synthetic"),
        "events": r.xlen(client.keys.events()), "jobs": r.zcard(client.keys.jobs())}


def _run_stream(client: NovaClient, duration_s: float, started: float) -> tuple[list, int]:
    """Enqueue JOBS_PER_S jobs per second for ``duration_s``, sampling as it goes."""
    samples, jobs, next_sample = [], 0, 0.0
    tasks = [TaskSpec(f"soak {i}") for i in range(TASKS_PER_JOB)]
    while True:
        now = time.monotonic() - started
        if now >= duration_s:
            return samples, jobs
        if now >= next_sample:
            samples.append(_sample(client, started))
            next_sample += SAMPLE_EVERY_S
        client.enqueue("synthetic", tasks, params={"seconds": 0, "size": 64},
                       retention_s=RETENTION_S)
        jobs += 1
        time.sleep(max(0.0, started + jobs / JOBS_PER_S - time.monotonic()))


def _window(samples: list[dict[str, Any]], at_s: float, key: str, n: int = 3) -> float:
    """The mean of ``key`` over the ``n`` samples nearest ``at_s`` (noise of one sample)."""
    near = sorted(samples, key=lambda s: abs(s["t_s"] - at_s))[:n]
    return statistics.fmean(s[key] for s in near)


def _rate(samples: list[dict[str, Any]], t0: float, t1: float) -> float:
    """Tasks committed per second between the samples nearest t0 and t1."""
    a = min(samples, key=lambda s: abs(s["t_s"] - t0))
    b = min(samples, key=lambda s: abs(s["t_s"] - t1))
    return (b["done"] - a["done"]) / max(b["t_s"] - a["t_s"], 1e-9)


def summarize(samples: list[dict[str, Any]], warmup_s: float, jobs: int,
              duration_s: float) -> dict[str, Any]:
    """The figures of a soak from its samples."""
    end = samples[-1]["t_s"]
    mem0, mem1 = _window(samples, warmup_s, "used_memory"), _window(samples, end, "used_memory")
    keys0, keys1 = _window(samples, warmup_s, "keys"), _window(samples, end, "keys")
    mid = (warmup_s + end) / 2
    return {
        "config": {"duration_s": duration_s, "warmup_s": warmup_s, "retention_s": RETENTION_S,
                   "jobs_per_s": JOBS_PER_S, "tasks_per_job": TASKS_PER_JOB,
                   "events_maxlen": EVENTS_MAXLEN, "workers": WORKERS,
                   "sample_every_s": SAMPLE_EVERY_S},
        "samples": samples, "jobs_enqueued": jobs,
        "offered_tasks_per_s": JOBS_PER_S * TASKS_PER_JOB,
        "memory_after_warmup_bytes": round(mem0), "memory_end_bytes": round(mem1),
        "memory_growth_after_warmup_pct": 100 * (mem1 - mem0) / mem0,
        "keys_after_warmup": round(keys0), "keys_end": round(keys1),
        "keys_growth_after_warmup_pct": 100 * (keys1 - keys0) / max(keys0, 1),
        "tasks_per_s_after_warmup": _rate(samples, warmup_s, end),
        "tasks_per_s_first_half": _rate(samples, warmup_s, mid),
        "tasks_per_s_second_half": _rate(samples, mid, end),
        "backlog_end": samples[-1]["pending"],
    }


def run_section(folder: Path, *, quick: bool) -> dict[str, Any]:
    """The soak on a private redis-server: 2 minutes (``--quick``) or 8."""
    duration_s = 120.0 if quick else 480.0
    warmup_s = max(4 * RETENTION_S, duration_s / 3)
    server = start_redis()
    store_url = (folder / "soak-store").as_uri()
    client = NovaClient.from_url(server.url, namespace="soak", job_retention_s=RETENTION_S,
                                 events_maxlen=EVENTS_MAXLEN)
    workers = [start_nova_worker(server.url, "soak", store_url, folder, f"soak{i}", 1.0,
                                 lease_ttl_s=10, heartbeat_s=2, extra=("--no-benchmark",),
                                 env={"NOVA_EVENTS_MAXLEN": str(EVENTS_MAXLEN)})
               for i in range(WORKERS)]
    try:
        wait_for(lambda: len(client.eligible_workers("synthetic")) == WORKERS, timeout_s=120,
                 message="soak workers to register")
        log(f"soak: {duration_s:.0f} s of {JOBS_PER_S:g} jobs/s × {TASKS_PER_JOB} tasks, "
            f"retention {RETENTION_S} s")
        started = time.monotonic()
        samples, jobs = _run_stream(client, duration_s, started)
        samples.append(_sample(client, started))
        out = summarize(samples, warmup_s, jobs, duration_s)
        log(f"soak: memory {out['memory_growth_after_warmup_pct']:+.1f} % after warm-up, "
            f"{out['tasks_per_s_after_warmup']:.1f} tasks/s held")
        return out
    finally:
        stop_all(workers)
        client.close()
        server.close()


def markdown(k: dict[str, Any], table: Callable[[list[str], list[list[str]]], list[str]]
             ) -> list[str]:
    """BENCHMARKS.md's soak section (``table`` renders a Markdown table)."""
    cfg = k["config"]
    mib = 2**20
    return ["## Soak: bounded Redis memory", "",
            (f"{cfg['duration_s']:.0f} s of {cfg['jobs_per_s']:g} jobs per second of "
             f"{cfg['tasks_per_job']} no-op tasks each ({k['jobs_enqueued']} jobs), "
             f"{cfg['workers']} worker processes, on a redis-server of its own; jobs are kept "
             f"{cfg['retention_s']} s once finished (`enqueue --retention`), the event stream "
             f"{cfg['events_maxlen']} entries. Every enqueue runs the retention sweep. Warm-up: "
             f"the first {cfg['warmup_s']:.0f} s (jobs expire as fast as they arrive, the "
             "stream reaches its cap); growth is measured from there to the end, each end the "
             f"mean of 3 samples {cfg['sample_every_s']:g} s apart."), "",
            *table(["measure", "after warm-up", "end", "growth"], [
                ["Redis used_memory", f"{k['memory_after_warmup_bytes'] / mib:.2f} MiB",
                 f"{k['memory_end_bytes'] / mib:.2f} MiB",
                 f"{k['memory_growth_after_warmup_pct']:+.1f} %"],
                ["keys", str(k["keys_after_warmup"]), str(k["keys_end"]),
                 f"{k['keys_growth_after_warmup_pct']:+.1f} %"]]),
            (f"Throughput held: {k['tasks_per_s_after_warmup']:.1f} tasks/s after the warm-up "
             f"({k['tasks_per_s_first_half']:.1f} in its first half, "
             f"{k['tasks_per_s_second_half']:.1f} in its second; offered "
             f"{k['offered_tasks_per_s']:g}); {k['backlog_end']} tasks pending at the end."),
            "", "![Redis memory and keys over the soak](bench-soak.png)", ""]


def write_doc(k: dict[str, Any], folder: Path) -> None:
    """The soak's block of ``folder/BENCHMARKS.md`` and its plot."""
    import plots
    import report
    from docsection import put_block

    folder.mkdir(parents=True, exist_ok=True)
    plots.soak_plot(k, folder / "bench-soak.png")
    put_block(folder / "BENCHMARKS.md", "soak", "\n".join(markdown(k, report._table)))


def main(argv: list[str] | None = None) -> int:
    """Run the soak (or read an earlier one's JSON); write its JSON and doc block if asked."""
    p = argparse.ArgumentParser(prog="benchmarks/soak.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="2 minutes instead of 8")
    p.add_argument("--json", metavar="OUT", type=Path, help="write the figures as JSON")
    p.add_argument("--doc", metavar="DIR", type=Path, help="write its BENCHMARKS.md block and plot")
    p.add_argument("--from-json", metavar="IN", type=Path, help="run nothing: render IN's soak")
    args = p.parse_args(argv)
    if args.from_json:
        data = json.loads(args.from_json.read_text(encoding="utf-8"))
        k = data.get("soak", data)
    else:
        with tempfile.TemporaryDirectory(prefix="nova-soak-") as folder:
            k = run_section(Path(folder), quick=args.quick)
    if args.json:
        args.json.write_text(json.dumps({"soak": k}, indent=1))
    if args.doc:
        write_doc(k, args.doc)
    print(f"memory {k['memory_growth_after_warmup_pct']:+.1f} % after warm-up, "
          f"{k['tasks_per_s_after_warmup']:.1f} tasks/s held")
    return 0


if __name__ == "__main__":
    sys.exit(main())
