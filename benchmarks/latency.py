"""Pickup latency on an idle pool: one task at a time, nova-queue beside BullMQ and RQ.

Each system gets one idle worker process on the run's redis-server and a no-op task:

* nova-queue: a real ``nova-queue worker --app bench-noop`` (the no-op plugin app of
  ``worker_throughput.py``, file store). Per sample: t0, ``NovaClient.enqueue`` of a one-task
  job, then the client follows the event stream (``XREAD BLOCK``) to the job's
  ``job_finished``. Pickup = the ``claimed`` event's time − t0; result = when the client sees
  ``job_finished`` − t0.
* BullMQ: ``bullmq_latency.js`` (one ``Worker``; pickup from the job's ``processedOn``, result
  when ``waitUntilFinished`` returns).
* RQ: one ``rq worker -w rq.worker.SimpleWorker``; pickup = ``started_at`` − t0; result when
  ``job.latest_result(timeout=…)`` (a blocking read of RQ's result stream) returns.

Event times are Redis's clock (ms resolution) and BullMQ's ``processedOn`` is ms too; t0 is
this process's wall clock — one machine, one clock. The first samples of each are dropped
(connections, script loads).

    python benchmarks/latency.py --samples 200
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import bullmq
from benchlib import log
from fleet import Proc, _env, stop_all
from worker_throughput import APP, _drop, install_app, job_span, start_worker

from nova_queue import NovaClient
from nova_queue.local import RedisServer, wait_for
from nova_queue.models import TaskSpec

WARMUP = 10


def percentiles(values: list[float]) -> dict[str, float]:
    """p50 / p90 / p99 / max of ``values`` (nearest rank)."""
    xs = sorted(values)

    def rank(q: float) -> float:
        return xs[min(len(xs) - 1, max(0, math.ceil(q * len(xs)) - 1))]

    return {"p50_ms": rank(0.50), "p90_ms": rank(0.90), "p99_ms": rank(0.99), "max_ms": xs[-1],
            "samples": len(xs)}


def nova_latency(server: RedisServer, folder: Path, samples: int) -> dict[str, Any]:
    """One idle real worker; ``samples`` one-task jobs, one at a time."""
    site = install_app(folder)
    ns = f"lat{uuid.uuid4().hex[:8]}"
    store = (folder / f"store-{ns}").resolve().as_uri()
    client = NovaClient.from_url(server.url, namespace=ns)
    proc = start_worker(server.url, ns, store, folder, site, "lat-w0", 1)
    pickup, result = [], []
    try:
        wait_for(lambda: any(APP in w.apps for w in client.workers(include_gone=False))
                 or not proc.alive(), timeout_s=120)
        if not proc.alive():
            raise RuntimeError(f"worker exited: {proc.output()[-2000:]}")
        for i in range(WARMUP + samples):
            time.sleep(0.02)  # the worker back in its wait (XREAD BLOCK) between samples
            mark = client.last_event_id()
            t0 = time.time()
            job = client.enqueue(APP, [TaskSpec(f"t{i}", 1.0)])
            claimed_ms, _, seen = job_span(client, job, mark, timeout_s=30)
            if i >= WARMUP:
                pickup.append(claimed_ms - t0 * 1000)
                result.append((seen - t0) * 1000)
    finally:
        stop_all([proc])
        r = server.client()
        _drop(r, client.prefix)
        r.close()
        client.close()
    return {"pickup": percentiles(pickup), "result": percentiles(result)}


def rq_latency(server: RedisServer, folder: Path, samples: int) -> dict[str, Any]:
    """One idle RQ SimpleWorker; ``samples`` no-op jobs, one at a time."""
    import redis
    from rq import Queue

    name = f"lat{uuid.uuid4().hex[:6]}"
    r = redis.Redis.from_url(server.url)  # RQ reads bytes
    argv = [sys.executable, "-m", "rq.cli", "worker", "-w", "rq.worker.SimpleWorker",
            "--url", server.url, "--quiet", name]
    proc = Proc("rq-lat", argv, _env(PYTHONPATH=str(HERE)), folder / "rq-lat.log")
    q = Queue(name, connection=r)
    pickup, result = [], []
    try:
        wait_for(lambda: r.scard(f"rq:workers:{name}") > 0 or not proc.alive(), timeout_s=60)
        if not proc.alive():
            raise RuntimeError(f"rq worker exited: {proc.output()[-2000:]}")
        for i in range(WARMUP + samples):
            time.sleep(0.02)
            t0 = time.time()
            job = q.enqueue("rq_jobs.noop")
            res = job.latest_result(timeout=30)
            seen = time.time()
            if res is None:
                raise RuntimeError(f"RQ job {job.id}: no result in 30 s")
            job.refresh()
            if i >= WARMUP:
                pickup.append((job.started_at.timestamp() - t0) * 1000)
                result.append((seen - t0) * 1000)
    finally:
        stop_all([proc])
        for key in r.scan_iter(match=f"rq:*{name}*", count=1000):
            r.unlink(key)
        r.close()
    return {"pickup": percentiles(pickup), "result": percentiles(result)}


def bullmq_latency(server: RedisServer, bull: dict[str, Any], folder: Path,
                   samples: int) -> dict[str, Any]:
    """``bullmq_latency.js`` on the run's redis-server."""
    argv = ["node", str(HERE / "bullmq_latency.js"), "--port", str(server.port), "--queue",
            f"lat{uuid.uuid4().hex[:6]}", "--samples", str(samples), "--warmup", str(WARMUP)]
    out = subprocess.run(argv, env={**os.environ, "NODE_PATH": bull["node_path"]}, cwd=folder,
                         capture_output=True, text=True, timeout=600, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"bullmq_latency.js failed: {out.stderr.strip()[-500:]}")
    res = json.loads(out.stdout.strip().splitlines()[-1])
    return {"pickup": percentiles(res["pickup_ms"]), "result": percentiles(res["result_ms"])}


def run_section(server: RedisServer, folder: Path, *, samples: int = 200) -> dict[str, Any]:
    """Latency of nova-queue, RQ and (with node and npm) BullMQ; the flat keys the docs and
    the targets read."""
    folder.mkdir(parents=True, exist_ok=True)
    log(f"latency: nova-queue, {samples} one-task jobs on an idle worker")
    out: dict[str, Any] = {"samples": samples, "warmup": WARMUP,
                           "nova": nova_latency(server, folder, samples)}
    log("latency: RQ")
    out["rq"] = rq_latency(server, folder, samples)
    bull = bullmq.setup()
    if bull["available"]:
        log("latency: BullMQ")
        out["bullmq"] = bullmq_latency(server, bull, folder, samples)
    else:
        out["bullmq_note"] = bull["note"]
    for system in ("nova", "rq", "bullmq"):
        if system in out:
            out[f"{system}_p50_ms"] = out[system]["pickup"]["p50_ms"]
            out[f"{system}_p99_ms"] = out[system]["pickup"]["p99_ms"]
            out[f"{system}_result_p50_ms"] = out[system]["result"]["p50_ms"]
            out[f"{system}_result_p99_ms"] = out[system]["result"]["p99_ms"]
    return out


def targets(lat: dict[str, Any] | None) -> list[tuple[str, Any, Any]]:
    """(target, measured, met) rows; met None when the section did not run."""
    return [("pickup latency (enqueue → first claim, idle pool) p50 ≤ 5 ms",
             lat and (f"{lat['nova_p50_ms']:.1f} ms (BullMQ {lat['bullmq_p50_ms']:.1f}, RQ "
                      f"{lat['rq_p50_ms']:.1f})" if "bullmq_p50_ms" in lat
                      else f"{lat['nova_p50_ms']:.1f} ms (RQ {lat['rq_p50_ms']:.1f})"),
             lat and lat["nova_p50_ms"] <= 5),
            ("pickup latency p99 ≤ 25 ms",
             lat and f"{lat['nova_p99_ms']:.1f} ms", lat and lat["nova_p99_ms"] <= 25)]


def section(lat: dict[str, Any]) -> list[str]:
    """The latency block's text."""
    from reportlib import fmt, table

    rows = []
    for system, label in (("nova", "nova-queue (`nova-queue worker`)"), ("bullmq", "BullMQ"),
                          ("rq", "RQ SimpleWorker")):
        if system in lat:
            pk, rs = lat[system]["pickup"], lat[system]["result"]
            rows.append([label, fmt(pk["p50_ms"], ".1f"), fmt(pk["p99_ms"], ".1f"),
                         fmt(rs["p50_ms"], ".1f"), fmt(rs["p99_ms"], ".1f")])
    note = "" if "bullmq" in lat else f" {lat.get('bullmq_note', '')}"
    return ["## Pickup latency", "",
            (f"One task at a time on an idle pool, {lat['samples']} samples each (the first "
             f"{lat['warmup']} dropped), one worker process per system on the same "
             "redis-server (`benchmarks/latency.py`). Pickup: enqueue → the worker takes the "
             "task (nova's `claimed` event, BullMQ's `processedOn`, RQ's `started_at`); "
             "result: enqueue → the client sees the result. nova's and BullMQ's pickup stamps "
             "are whole milliseconds (truncated), so their pickup reads up to 1 ms low; the "
             "result column is this process's clock." + note), "",
            *table(["system", "pickup p50 ms", "pickup p99 ms", "result p50 ms",
                    "result p99 ms"], rows)]


def write_doc(lat: dict[str, Any], folder: Path) -> None:
    """The latency block of ``folder/BENCHMARKS.md``."""
    from docsection import put_block

    folder.mkdir(parents=True, exist_ok=True)
    put_block(folder / "BENCHMARKS.md", "latency", "\n".join(section(lat)))


def main() -> None:
    from benchlib import start_redis

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--samples", type=int, default=200)
    p.add_argument("--json", type=Path)
    p.add_argument("--doc", metavar="DIR", type=Path, help="write the block of DIR/BENCHMARKS.md")
    args = p.parse_args()
    server = start_redis()
    try:
        out = run_section(server, Path(tempfile.mkdtemp(prefix="nova-lat-")),
                          samples=args.samples)
    finally:
        server.close()
    text = json.dumps(out, indent=2)
    if args.json:
        args.json.write_text(text)
    if args.doc:
        write_doc(out, args.doc)
    print(text)


if __name__ == "__main__":
    main()
