"""A baseline worker process: FIFO / static pull from a Redis list, or an RQ SimpleWorker.

    python benchmarks/pull_worker.py --redis URL --name N --slowdown F --store URL \
        --ready-key K (--list KEY --done-key KEY | --rq QUEUE) [--no-startup]

It first does the startup every GPU worker does (torch import, backend self-test, matmul
timing; ``--no-startup`` skips it), records ``{"worker", "ready"}`` on ``--ready-key``, then
either pops tasks from ``--list`` (blocking; each result recorded on ``--done-key`` as
``{"worker", "index", "start", "end", "run_s"}``, wall-clock seconds) or runs an RQ
``SimpleWorker`` on queue ``--rq``, until it is stopped (SIGTERM).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import redis


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--redis", required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--slowdown", type=float, default=1.0)
    p.add_argument("--store", default="")
    p.add_argument("--ready-key", required=True)
    p.add_argument("--list")
    p.add_argument("--done-key")
    p.add_argument("--rq")
    p.add_argument("--no-startup", action="store_true")
    args = p.parse_args()
    if not args.no_startup:
        from workload import baseline_startup

        baseline_startup()
    r = redis.Redis.from_url(args.redis)
    if args.rq:
        from rq import Queue, SimpleWorker

        os.environ.update(NOVA_BENCH_WORKER=args.name, NOVA_BENCH_SLOWDOWN=str(args.slowdown),
                          NOVA_BENCH_STORE_URL=args.store)
        worker = SimpleWorker([Queue(args.rq, connection=r)], connection=r,
                              name=f"{args.name}-{os.getpid()}")
        r.rpush(args.ready_key, json.dumps({"worker": args.name, "ready": time.time()}))
        worker.work(logging_level="WARNING")
        return
    from workload import Workload

    work = Workload(args.name, args.slowdown, args.store)
    r.rpush(args.ready_key, json.dumps({"worker": args.name, "ready": time.time()}))
    while True:
        popped = r.blpop([args.list], timeout=1)
        if popped is None:
            continue
        raw = popped[1]
        started = time.time()
        task = json.loads(raw)
        run_s = work.run(task["job"], task["index"], task["text"], task["seconds"])
        r.rpush(args.done_key, json.dumps({"worker": args.name, "index": task["index"],
                                           "start": started, "end": time.time(),
                                           "run_s": run_s}))


if __name__ == "__main__":
    main()
