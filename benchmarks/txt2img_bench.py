"""Images per second of the txt2img app: eager vs torch.compile, per batch size.

Load time, first-batch time (for compiled runs: compilation for that batch shape) and the
steady state are reported apart. Each row runs ``Txt2ImgRunner.run_batch`` as a worker would
(pipeline call, backend synchronised before the timer is read, PNG encoding). Not a test.

    python benchmarks/txt2img_bench.py --size 64                 # tiny random model, any CPU
    python benchmarks/txt2img_bench.py --backend cuda --model stabilityai/sd-turbo
    python benchmarks/txt2img_bench.py --backend cuda --full-size-random --json out.json

Without ``--model`` it builds the tiny random-weight model in a temporary folder
(``--full-size-random``: the full-size SD-Turbo-shaped one, minutes to build, ~2.6 GB).
Compiled runs are on by default on cuda/rocm only (``--force-compile`` elsewhere).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from nova_queue.apps.base import AppContext, TaskInput
from nova_queue.apps.txt2img import Txt2ImgSpec
from nova_queue.workers.apps.txt2img import BENCHMARK_PROMPT, Txt2ImgRunner


def detect_context(requested: str) -> AppContext:
    """An AppContext for ``requested`` (auto|cuda|rocm|mps|cpu), with memory figures."""
    import torch

    has_cuda = torch.cuda.is_available()
    is_rocm = has_cuda and getattr(torch.version, "hip", None) is not None
    backend = requested
    if requested == "auto":
        backend = ("rocm" if is_rocm else "cuda") if has_cuda else (
            "mps" if torch.backends.mps.is_available() else "cpu")
    if backend in ("cuda", "rocm"):
        if not has_cuda or (backend == "rocm") != is_rocm:
            sys.exit(f"backend {backend} is not available in this torch build")
        free, total = torch.cuda.mem_get_info()
        return AppContext(backend, "cuda:0", torch.cuda.get_device_name(0), "bench", "bench",
                          memory_total=total, memory_free=free)
    if backend == "mps":
        if not torch.backends.mps.is_available():
            sys.exit("backend mps is not available")
        return AppContext("mps", "mps", "Apple GPU", "bench", "bench",
                          memory_total=_host_memory())
    return AppContext("cpu", "cpu", platform.processor() or platform.machine(), "bench", "bench",
                      memory_total=_host_memory(), memory_free=_host_memory())


def _host_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def bench_mode(ctx: AppContext, model: str, *, compiled: bool, size: tuple[int, int],
               steps: int, batches: list[int], iters: int,
               encode_threads: int | None = None) -> list[dict[str, Any]]:
    """One row per batch size for a fresh app (eager or compiled)."""
    spec = Txt2ImgSpec()
    app = Txt2ImgRunner(spec)
    if encode_threads:
        app.encode_threads = encode_threads
    # the operator's model, as a worker's `-o model=DIR`: a folder is then an allowed root
    app.setup(dataclasses.replace(ctx, options={**ctx.options, "model": model}))
    width, height = size
    raw = {"model": model, "width": width, "height": height, "steps": steps,
           "compile": compiled}
    app.prepare(spec.parse_params(raw))
    load_s = app.last_load_s or 0.0
    rows = []
    for batch in batches:
        params = spec.parse_params({**raw, "batch": batch})
        tasks = [TaskInput(f"bench:{i}", "bench", i, f"{BENCHMARK_PROMPT} #{i}", 1.0, params,
                           1, 1, "bench") for i in range(batch)]
        started = time.perf_counter()
        app.run_batch(tasks)
        first_s = time.perf_counter() - started
        walls, pipes = [], []
        for _ in range(iters):
            started = time.perf_counter()
            app.run_batch(tasks)
            walls.append(time.perf_counter() - started)
            pipes.append(app.last_run_s or walls[-1])
        wall_s, pipe_s = statistics.median(walls), statistics.median(pipes)
        rows.append({
            "mode": "compile" if compiled else "eager", "dtype": app.dtype_name, "batch": batch,
            "encode_threads": app.encode_threads,
            "load_s": load_s,
            "first_batch_s": first_s, "steady_batch_s": wall_s, "images_per_s": batch / wall_s,
            "pipeline_images_per_s": batch / pipe_s, "ms_per_image": 1000 * wall_s / batch,
        })
        print(f"  {rows[-1]['mode']:7s} batch {batch:2d}: first {first_s:7.3f}s, "
              f"steady {wall_s:7.3f}s/batch, {batch / wall_s:8.2f} img/s", flush=True)
    app.teardown()
    return rows


def _table(rows: list[dict[str, Any]]) -> str:
    head = (f"{'mode':8s} {'batch':>5s} {'load s':>8s} {'first s':>9s} {'steady s':>9s} "
            f"{'ms/img':>9s} {'img/s':>9s} {'pipe img/s':>11s}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['mode']:8s} {r['batch']:5d} {r['load_s']:8.3f} "
                     f"{r['first_batch_s']:9.3f} {r['steady_batch_s']:9.3f} "
                     f"{r['ms_per_image']:9.1f} {r['images_per_s']:9.2f} "
                     f"{r['pipeline_images_per_s']:11.2f}")
    return "\n".join(lines)


def _size(text: str) -> tuple[int, int]:
    width, _, height = text.lower().partition("x")
    return int(width), int(height or width)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="hub id or local folder (default: build a random model)")
    ap.add_argument("--full-size-random", action="store_true",
                    help="build the full-size SD-Turbo-shaped random model first")
    ap.add_argument("--backend", default="auto", choices=["auto", "cuda", "rocm", "mps", "cpu"])
    ap.add_argument("--size", default="512", type=_size, help="N or WxH (default 512)")
    ap.add_argument("--steps", default=1, type=int)
    ap.add_argument("--batches", default="1,4,8",
                    type=lambda s: [int(x) for x in s.split(",") if x])
    ap.add_argument("--iters", default=3, type=int, help="steady-state runs per batch size")
    ap.add_argument("--no-compile", action="store_true", help="eager mode only")
    ap.add_argument("--force-compile", action="store_true",
                    help="also compile on cpu/mps (skipped there by default: a cold inductor "
                         "compile takes minutes on a small CPU)")
    ap.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    ap.add_argument("--encode-threads", type=int,
                    help="threads encoding a batch's PNGs (default: the runner's, up to 8)")
    ap.add_argument("--json", dest="json_out", type=Path, help="write the results here")
    ap.add_argument("--doc", type=Path, help="record the run (date, machine, table) in this "
                    "Markdown file, e.g. docs/BENCHMARKS.md (one block per backend/model/size)")
    return ap


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print a table (and write JSON with ``--json``)."""
    args = _parser().parse_args(argv)

    import diffusers
    import torch

    from nova_queue.workers.apps.txt2img_model import make_model

    if args.threads:
        torch.set_num_threads(args.threads)
    ctx = detect_context(args.backend)
    with tempfile.TemporaryDirectory(prefix="nova-bench-") as tmp:
        model = args.model
        build_s = None
        if model is None:
            started = time.perf_counter()
            model = str(make_model(Path(tmp) / "model", full_size=args.full_size_random))
            build_s = time.perf_counter() - started
            kind = "full-size" if args.full_size_random else "tiny"
            print(f"built a {kind} random-weight model in {build_s:.1f}s", flush=True)
        print(f"backend {ctx.backend} ({ctx.device_name}), model {model}, "
              f"size {args.size[0]}x{args.size[1]}, steps {args.steps}", flush=True)
        modes = [False]
        if not args.no_compile:
            if ctx.backend in ("cuda", "rocm") or args.force_compile:
                modes.append(True)
            else:
                print(f"torch.compile skipped on {ctx.backend} (--force-compile to include)")
        rows = []
        for compiled in modes:
            rows += bench_mode(ctx, model, compiled=compiled, size=args.size, steps=args.steps,
                               batches=args.batches, iters=args.iters,
                               encode_threads=args.encode_threads)
    print(_table(rows))
    if args.json_out:
        report = {
            "backend": ctx.backend, "device": ctx.device, "device_name": ctx.device_name,
            "model": args.model or ("full-size-random" if args.full_size_random
                                    else "tiny-random"),
            "model_build_s": build_s, "width": args.size[0], "height": args.size[1],
            "steps": args.steps, "torch": torch.__version__, "diffusers": diffusers.__version__,
            "threads": torch.get_num_threads(), "results": rows,
        }
        args.json_out.write_text(json.dumps(report, indent=2))
    if args.doc:
        _record(args, ctx, rows, build_s, torch.__version__, diffusers.__version__)
    return 0


def _record(args: argparse.Namespace, ctx: Any, rows: list[dict[str, Any]],
            build_s: float | None, torch_version: str, diffusers_version: str) -> None:
    """Put this run in its own block of ``args.doc`` (see docsection.py)."""
    import datetime

    import torch
    from docsection import put_block

    model = args.model or ("full-size random-weight" if args.full_size_random
                           else "tiny random-weight")
    w, h = args.size
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    body = "\n".join([
        f"### txt2img: {ctx.backend}, {model} model, {w}x{h}, {args.steps} step(s)",
        "",
        f"`python benchmarks/txt2img_bench.py` on {stamp}: {ctx.device_name} "
        f"({platform.machine()}, {torch.get_num_threads()} threads), torch {torch_version}, "
        f"diffusers {diffusers_version}" + (f"; model built in {build_s:.1f} s" if build_s else "")
        + f", PNGs encoded on {rows[0]['encode_threads']} thread(s). Load, first batch "
        "(compile / warm-up) and steady state are timed apart, the device synchronised "
        "before each timer read; images/s counts the whole batch as a worker runs it (PNGs "
        "included), pipeline images/s the pipeline call alone. Random weights: the images "
        "are noise (the worst case for PNG compression), the timing is real.",
        "",
        ("| mode | batch | load s | first batch s | steady batch s | ms/image | images/s | "
         "pipeline images/s |"),
        "|---|---|---|---|---|---|---|---|",
        *[f"| {r['mode']} | {r['batch']} | {r['load_s']:.3f} | {r['first_batch_s']:.3f} | "
          f"{r['steady_batch_s']:.3f} | {r['ms_per_image']:.1f} | {r['images_per_s']:.2f} | "
          f"{r['pipeline_images_per_s']:.2f} |"
          for r in rows],
    ])
    kind = "model" if args.model else "full" if args.full_size_random else "tiny"
    put_block(args.doc, f"txt2img:{ctx.backend}:{kind}:{w}x{h}", body)
    print(f"recorded in {args.doc}")


if __name__ == "__main__":
    sys.exit(main())
