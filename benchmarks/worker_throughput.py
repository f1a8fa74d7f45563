"""Small tasks through the product: real ``nova-queue worker`` processes running a no-op app.

The lifecycle-throughput section's nova figures come from a protocol loop (``NovaClient``
claim 64 / commit 64, no app, no store): a harness figure. This module measures what a user
runs: P real ``python -m nova_queue worker --app noop`` processes (the documented command,
a file store, the normal path: claim, app, store, commit), started and registered before a
job of N no-op tasks is enqueued. A run's rate is N ÷ (last commit − first claim), both read
off the namespace's event stream (Redis's clock, ms); process start-up, the startup benchmark
and the enqueue are outside the window. Redis CPU per task is the redis-server process's CPU
from just before the enqueue to the job's end, less that of the same enqueue measured alone.

The no-op app is a third-party app written as one class (``nova_queue.apps.base.App``),
installed as a distribution (a dist-info folder with ``entry_points.txt``) on the workers'
``PYTHONPATH``, as a user's plugin would be. Its result is two bytes of text.

    python benchmarks/worker_throughput.py --tasks 10000 --point 1:1 --point 1:8   # alone
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from benchlib import log, median, redis_cpu_s, script_stats
from fleet import Proc, _env, stop_all

from nova_queue import NovaClient
from nova_queue.local import RedisServer, wait_for
from nova_queue.models import TaskSpec

APP = "bench-noop"
NOOP_APP = '''
"""A no-op nova-queue app (the worker-throughput benchmark's): one class, one tiny result."""
from nova_queue.apps.base import App, TaskOutput


class NoopApp(App):
    name = "bench-noop"
    description = "returns 'ok' for each task (benchmark)"
    concurrent = True  # nothing shared: --concurrency N may run N batches at once

    def setup(self, ctx):
        pass

    def run_batch(self, tasks):
        return [TaskOutput(b"ok", "text/plain", "txt") for _ in tasks]

    def benchmark_task(self):
        return "benchmark", {}
'''


def install_app(folder: Path) -> Path:
    """A site folder holding the no-op app and its distribution metadata (entry point)."""
    site = folder / "noop-site"
    dist = site / "nova_bench_noop-1.0.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: nova-bench-noop\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[nova_queue.apps]\n{APP} = noopapp:NoopApp\n")
    (site / "noopapp.py").write_text(NOOP_APP)
    return site


def start_worker(url: str, ns: str, store: str, folder: Path, site: Path, name: str,
                 concurrency: int) -> Proc:
    """``python -m nova_queue … worker --app bench-noop``: the documented command."""
    home = folder / f"home-{name}"
    home.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "nova_queue", "--redis", url, "--namespace", ns,
            "--store", store, "--log-level", "warning", "worker", "--app", APP,
            "--name", name, "--concurrency", str(concurrency)]
    env = _env(NOVA_HOME=str(home), PYTHONPATH=str(site))
    return Proc(name, argv, env, folder / f"{name}.log")


def job_span(client: NovaClient, job_id: str, after: str = "0-0", *,
             timeout_s: float = 600.0) -> tuple[int, int, float]:
    """(first claim, job_finished) in Redis ms, and the wall time (``time.time()``) this
    client read the job_finished event: the event stream followed from ``after`` (XREAD
    BLOCK, so events still to come are waited for)."""
    first = None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        evs = client.events(after, count=1000, block_ms=1000)
        seen = time.time()
        for e in evs:
            if e.fields.get("job") != job_id:
                continue
            if first is None and e.type in ("claimed", "claimed_many"):
                first = e.ts_ms
            if e.type == "job_finished":
                if first is None:
                    raise RuntimeError(f"job {job_id} finished without a claim event")
                return first, e.ts_ms, seen
        if evs:
            after = evs[-1].id
    raise RuntimeError(f"job {job_id} did not finish in {timeout_s:.0f} s")


def enqueue_cost(server: RedisServer, n_tasks: int) -> float:
    """Redis CPU seconds of enqueueing a job of ``n_tasks`` alone (no worker listening)."""
    ns = f"wtq{uuid.uuid4().hex[:8]}"
    client = NovaClient.from_url(server.url, namespace=ns)
    r = server.client()
    cpu0 = redis_cpu_s(r)
    client.enqueue(APP, [TaskSpec(str(i), 1.0) for i in range(n_tasks)])
    cpu = redis_cpu_s(r) - cpu0
    _drop(r, client.prefix)
    r.close()
    client.close()
    return cpu


def _drop(r: Any, prefix: str) -> None:
    """Delete every key under ``prefix`` (a namespace's, no glob characters in it)."""
    keys = list(r.scan_iter(match=f"{prefix}*", count=1000))
    for lo in range(0, len(keys), 1000):
        r.unlink(*keys[lo:lo + 1000])


def worker_rate(server: RedisServer, folder: Path, site: Path, processes: int, n_tasks: int,
                *, concurrency: int = 1, ready_timeout_s: float = 120.0,
                run_timeout_s: float = 600.0) -> dict[str, Any]:
    """No-op tasks per second through ``processes`` real worker processes."""
    ns = f"wt{processes}c{concurrency}{uuid.uuid4().hex[:6]}"
    store = (folder / f"store-{ns}").resolve().as_uri()
    client = NovaClient.from_url(server.url, namespace=ns)
    procs = [start_worker(server.url, ns, store, folder, site, f"w{i}", concurrency)
             for i in range(processes)]
    r = server.client()
    try:
        wait_for(lambda: len([w for w in client.workers(include_gone=False)
                              if APP in w.apps]) >= processes
                 or any(not p.alive() for p in procs), timeout_s=ready_timeout_s)
        dead = [p for p in procs if not p.alive()]
        if dead:
            raise RuntimeError(f"worker {dead[0].name} exited: {dead[0].output()[-2000:]}")
        r.config_resetstat()
        cpu0 = redis_cpu_s(r)
        job = client.enqueue(APP, [TaskSpec(str(i), 1.0) for i in range(n_tasks)])
        wait_for(lambda: client.job(job, with_tasks=False).state in ("done", "failed"),
                 timeout_s=run_timeout_s, interval_s=0.05)
        cpu = redis_cpu_s(r) - cpu0
        scripts = script_stats(r)
        status = client.job(job, with_tasks=False)
        if status.done != n_tasks:
            raise RuntimeError(f"worker throughput: {status.done} of {n_tasks} tasks done "
                               f"({status.failed} failed)")
        first, last, _ = job_span(client, job)
    finally:
        stop_all(procs)
        _drop(r, client.prefix)
        r.close()
        client.close()
    seconds = max(last - first, 1) / 1000
    return {"processes": processes, "concurrency": concurrency, "tasks": n_tasks,
            "seconds": seconds, "tasks_per_s": n_tasks / seconds,
            "redis_cpu_s_with_enqueue": cpu, "scripts": scripts}


#: (processes, concurrency) points: 1, 2 and 4 processes, and one process running 8 at once
#: (the no-op app declares itself safe for ``--concurrency``).
POINTS = ((1, 1), (2, 1), (4, 1), (1, 8))
QUICK_POINTS = ((1, 1), (2, 1))


def run(server: RedisServer, folder: Path, *, points: tuple[tuple[int, int], ...] = POINTS,
        n_tasks: int = 10000, repeats: int = 1) -> dict[str, Any]:
    """Rates at each (processes, concurrency) point (median of ``repeats``, points interleaved
    in each repeat) and Redis CPU per task; the best point's figures flat."""
    site = install_app(folder)
    alone = enqueue_cost(server, n_tasks)
    runs: dict[tuple[int, int], list[dict[str, Any]]] = {pt: [] for pt in points}
    for rep in range(repeats):
        for p, c in points:
            res = worker_rate(server, folder, site, p, n_tasks, concurrency=c)
            res["redis_cpu_us_per_task"] = max(res.pop("redis_cpu_s_with_enqueue") - alone,
                                               0.0) / n_tasks * 1e6
            res.pop("scripts")
            runs[(p, c)].append(res)
            log(f"  real workers ×{p} (concurrency {c}): {res['tasks_per_s']:.0f} tasks/s, "
                f"Redis {res['redis_cpu_us_per_task']:.0f} µs/task ({rep + 1}/{repeats})")
    rows = [{"processes": p, "concurrency": c,
             "tasks_per_s": median([x["tasks_per_s"] for x in runs[(p, c)]]),
             "redis_cpu_us_per_task": median([x["redis_cpu_us_per_task"] for x in runs[(p, c)]])}
            for p, c in points]
    best = max(rows, key=lambda row: row["tasks_per_s"])
    one = max((row for row in rows if row["processes"] == 1), key=lambda row: row["tasks_per_s"])
    return {"rows": rows, "tasks": n_tasks, "repeats": repeats,
            "best_tasks_per_s": best["tasks_per_s"], "best_processes": best["processes"],
            "best_concurrency": best["concurrency"],
            "best_redis_cpu_us_per_task": best["redis_cpu_us_per_task"],
            "one_process_tasks_per_s": one["tasks_per_s"],
            "enqueue_redis_cpu_s": alone,
            "how": (f"real `nova-queue worker --app {APP}` processes (a one-class no-op "
                    "plugin app, a file store), registered before the job is enqueued; rate = "
                    "tasks ÷ (last commit − first claim) off the event stream; Redis CPU from "
                    "before the enqueue to the job's end, less the same enqueue measured alone")}


def main() -> None:
    from benchlib import start_redis

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", type=int, default=10000)
    p.add_argument("--point", action="append", metavar="P:C",
                   help="processes:concurrency, repeatable [default: 1:1 2:1 4:1 1:8]")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="nova-wt-"))
    server = start_redis()
    try:
        points = tuple(tuple(int(x) for x in pt.split(":")) for pt in args.point or ()) or POINTS
        out = run(server, folder, points=points, n_tasks=args.tasks, repeats=args.repeats)
    finally:
        server.close()
    text = json.dumps(out, indent=2)
    if args.json:
        args.json.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
