"""Scale: ``NovaClient.enqueue`` of 10k / 100k / 1M tasks (tasks/s, client wall time) and
Redis memory per pending task beyond its payload (the task's input bytes).

Each size runs on an emptied Redis (FLUSHALL). Memory per task = ``used_memory`` delta ÷ N
− mean input bytes; ``MEMORY USAGE`` of sampled task hashes and of the pending set shows
where it goes. Once per size, a 20k-task job is then enqueued on top of the N-task backlog:
a job larger than one chunk is staged and published into the pending set at the end.
"""

from __future__ import annotations

import random
import time
from typing import Any

from benchlib import evalsha_stats, log, median

from nova_queue import NovaClient, TaskSpec
from nova_queue.local import RedisServer

APP = "scale"


#: Size of the job enqueued on top of each backlog (two chunks: staged, then published).
ONTO_BACKLOG = 20_000


def enqueue_once(server: RedisServer, n_tasks: int, *, onto: bool = False) -> dict[str, Any]:
    """Enqueue one job of ``n_tasks`` into an empty Redis; time and memory. With ``onto``,
    also time a 20k-task job enqueued on top of that backlog."""
    r = server.client()
    r.flushall()
    client = NovaClient.from_url(server.url, namespace="bench")
    client.enqueue(APP, [TaskSpec("warm-up", 1.0)])  # load the scripts, create shared keys
    tasks = [TaskSpec(f"task {i}", 1.0) for i in range(n_tasks)]
    payload = sum(len(t.input.encode()) for t in tasks) / n_tasks
    used0 = int(r.info("memory")["used_memory"])
    r.config_resetstat()
    started = time.perf_counter()
    job = client.enqueue(APP, tasks)
    seconds = time.perf_counter() - started
    script_s = evalsha_stats(r)["usec"] / 1e6
    used1 = int(r.info("memory")["used_memory"])
    sample = random.Random(1).sample(range(n_tasks), min(200, n_tasks))
    task_key_bytes = sum(r.memory_usage(client.keys.task(f"{job}:{i}")) or 0
                         for i in sample) / len(sample)
    pending_bytes = (r.memory_usage(client.keys.pending(APP), samples=1000) or 0) / n_tasks
    onto_s = float("nan")
    if onto:
        more = [TaskSpec(f"more {i}", 1.0) for i in range(ONTO_BACKLOG)]
        started = time.perf_counter()
        client.enqueue(APP, more)
        onto_s = time.perf_counter() - started
    client.close()
    r.flushall()
    r.close()
    return {"tasks": n_tasks, "seconds": seconds, "tasks_per_s": n_tasks / seconds,
            "redis_script_s": script_s, "payload_bytes": payload,
            "bytes_per_task": (used1 - used0) / n_tasks,
            "bytes_per_task_beyond_payload": (used1 - used0) / n_tasks - payload,
            "task_hash_bytes": task_key_bytes, "pending_entry_bytes": pending_bytes,
            "onto_backlog_s": onto_s}


def run_section(server: RedisServer, *, quick: bool, repeats: int | None = None) -> dict[str, Any]:
    """Sizes 10k and 100k (repeated; median) and, unless quick, 1M (once)."""
    r = repeats or (3 if quick else 5)
    plan = [(10_000, r), (100_000, r)] + ([] if quick else [(1_000_000, 1)])
    rows = []
    for n, times in plan:
        runs = []
        for rep in range(times):
            runs.append(enqueue_once(server, n, onto=rep == times - 1))
            log(f"scale: {n} tasks ({rep + 1}/{times}): {runs[-1]['seconds']:.3f} s, "
                f"{runs[-1]['bytes_per_task_beyond_payload']:.0f} B/task beyond payload")
        row = {k: median([x[k] for x in runs]) for k in runs[0]}
        row["onto_backlog_s"] = runs[-1]["onto_backlog_s"]
        row["repeats"] = times
        row["best_seconds"] = min(x["seconds"] for x in runs)
        rows.append(row)
    at_100k = next(x for x in rows if x["tasks"] == 100_000)
    return {"enqueue_tasks_per_s": at_100k["tasks_per_s"],
            "enqueue_100k_s": at_100k["seconds"],
            "redis_bytes_per_task": at_100k["bytes_per_task_beyond_payload"],
            "rows": rows}
