"""nova-queue benchmarks: scheduling quality vs FIFO / RQ / static split, lifecycle
throughput vs RQ, enqueue scale and memory, recovery after kill -9 — real Redis, real
worker processes. Prints the targets; ``--json`` writes the numbers, ``--docs DIR`` writes
BENCHMARKS.md and its plots into DIR (only when asked: a checkout stays clean).

    python benchmarks/run.py --quick --json /tmp/bench.json
    python benchmarks/run.py --docs docs          # regenerate the tracked docs/BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # sibling modules, also when imported from elsewhere
    sys.path.insert(0, str(HERE))

SECTIONS = ("scheduling", "throughput", "latency", "scale", "recovery", "placement", "gateway",
            "verify", "cost", "soak")
#: Sections with a kept block of their own in BENCHMARKS.md (``--only S --docs`` writes it alone).
#: (The throughput section's real-worker figures also write a block of their own.)
BLOCKS = ("latency", "placement", "gateway", "verify", "cost", "soak")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(
        prog="benchmarks/run.py",
        description="Benchmark nova-queue against FIFO pull, RQ and a static split on real "
                    "Redis with real worker processes.")
    p.add_argument("--quick", action="store_true",
                   help="a few minutes: one repeat, static split computed, no 1M-task enqueue")
    p.add_argument("--json", metavar="OUT", type=Path, help="write the results as JSON to OUT")
    p.add_argument("--docs", metavar="DIR", type=Path, default=None,
                   help="write BENCHMARKS.md and the plots into DIR (`--docs docs` updates the "
                        "repository's; txt2img blocks already there are kept) [default: none]")
    p.add_argument("--only", choices=SECTIONS, action="append", metavar="SECTION",
                   help=f"run only this section (repeatable): {', '.join(SECTIONS)}")
    p.add_argument("--repeats", type=int, metavar="N",
                   help="repeats per measurement [default: 1 with --quick, else 3 (5 for scale)]")
    p.add_argument("--keep", action="store_true", help="keep worker logs and stores (path printed)")
    p.add_argument("--from-json", type=Path, metavar="IN",
                   help="run nothing: render the docs and plots from an earlier run's --json")
    return p.parse_args(argv)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the chosen sections on a private redis-server; returns the results."""
    import cost
    import gateway
    import gray
    import latency
    import placement
    import recovery
    import scale
    import scheduling
    import soak
    import throughput
    import verify
    from benchlib import load_avg, log, machine_info, start_redis

    import nova_queue

    sections = args.only or list(SECTIONS)
    folder = Path(tempfile.mkdtemp(prefix="nova-bench-"))
    server = start_redis()
    started = time.time()
    results: dict[str, Any] = {"quick": args.quick,
                               "machine": machine_info(server.version()),
                               "nova_queue_path": str(Path(nova_queue.__file__).parent)}
    try:
        if "scheduling" in sections:
            repeats = args.repeats or (1 if args.quick else 3)
            results["scheduling"] = scheduling.run_section(
                server, folder, repeats=repeats, real_static=not args.quick)
            results["scheduling"]["gray"] = gray.run_section(server, folder, repeats=repeats)
            for key in ("throttle_makespan_over_optimum", "blackhole_makespan_over_optimum",
                        "blackhole_failed_tasks", "hang_recovery_s",
                        "phantom_makespan_over_optimum"):
                results["scheduling"][key] = results["scheduling"]["gray"][key]
        if "throughput" in sections:
            results["throughput"] = throughput.run_section(server, folder, quick=args.quick,
                                                           repeats=args.repeats)
        if "latency" in sections:
            results["latency"] = latency.run_section(server, folder / "latency",
                                                     samples=60 if args.quick else 200)
        if "scale" in sections:
            results["scale"] = scale.run_section(server, quick=args.quick, repeats=args.repeats)
        for name, module in (("placement", placement), ("recovery", recovery),
                             ("gateway", gateway), ("verify", verify), ("cost", cost)):
            if name in sections:  # these run as (server, folder, quick=, repeats=)
                results[name] = module.run_section(server, folder, quick=args.quick,
                                                   repeats=args.repeats)
        if "soak" in sections:  # on a redis-server of its own: its memory is the measure
            results["soak"] = soak.run_section(folder, quick=args.quick)
    finally:
        server.close()
        if args.keep:
            log(f"logs and stores kept in {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    results["duration_s"] = time.time() - started
    results["machine"]["load_avg_end"] = load_avg()
    return results


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    args = parse_args(argv)
    import report
    from benchlib import log

    if args.from_json:
        results = json.loads(args.from_json.read_text(encoding="utf-8"))
    else:
        results = run(args)
    results["targets"] = report.targets(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
        log(f"results: {args.json}")
    if args.docs:
        write_docs(args, results)
    elif not args.json:
        log("no files written (--json OUT keeps the numbers, --docs DIR the report)")
    for t in results["targets"]:
        status = "n/a" if t["met"] is None else ("met" if t["met"] else "MISSED")
        print(f"{status:>6}  {t['target']}: {t['measured']}")
    log(f"done in {results['duration_s'] / 60:.1f} min")
    return 0


def write_docs(args: argparse.Namespace, results: dict[str, Any]) -> None:
    """BENCHMARKS.md and the plots into ``args.docs``. A partial run rewrites only its
    sections' own blocks: the rest of the document (targets, scheduling, throughput, ...)
    comes from the last full run and stays."""
    import plots
    import report
    from benchlib import log
    from docsection import kept_blocks

    written = []
    if args.only and not args.from_json:
        rest = [x for x in args.only if x not in BLOCKS]
        if rest:
            log(f"docs: {', '.join(rest)} render only in a full run's document: not written")
    else:
        written = plots.write_all(results, args.docs)
        doc = args.docs / "BENCHMARKS.md"
        kept = kept_blocks(doc.read_text(encoding="utf-8")) if doc.exists() else []
        doc.write_text(report.markdown(results).rstrip() + "\n" + "".join("\n" + b for b in kept),
                       encoding="utf-8")
    _write_blocks(results, args.docs)
    log(f"docs: {args.docs / 'BENCHMARKS.md'}, {', '.join(p.name for p in written)}")


def _write_blocks(results: dict[str, Any], docs: Path) -> None:
    """The sections with a block of their own in BENCHMARKS.md (real workers, latency,
    placement, the gateway, verification, cost under deadlines, the soak), each kept when a later run has none."""
    if "worker" in results.get("throughput", {}):
        import report_throughput

        report_throughput.write_worker_doc(results["throughput"], docs)
    if "latency" in results:
        import latency

        latency.write_doc(results["latency"], docs)
    if "placement" in results:
        import report_placement

        report_placement.write_doc(results["placement"], results["machine"], docs)
    if "gateway" in results:
        import gateway

        gateway.write_doc(results["gateway"], docs)
    if "verify" in results:
        import verify

        verify.write_doc(results["verify"], docs)
    if "cost" in results:
        import cost

        cost.write_doc(results["cost"], docs)
    if "soak" in results:
        import soak

        soak.write_doc(results["soak"], docs)


if __name__ == "__main__":
    sys.exit(main())
