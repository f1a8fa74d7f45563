"""Scenario 6: thousands of concurrent claims from several processes of several threads.
The history must never show two live leases on one task, and every accepted commit must be
the task's one committed lease."""

from __future__ import annotations

import collections
import json
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
from novatests.chaos import storm
from novatests.chaos.fleet import chaos_client
from novatests.chaos.history import Accepted, check, invariants

from nova_queue.local import wait_for

pytestmark = pytest.mark.slow

PROCS, THREADS, TASKS = 3, 4, 2400
STORM = Path(storm.__file__)  # run as a script, one process per storm worker


def test_claim_storm_never_two_live_leases(redis_url, namespace, tmp_path, record):
    started = time.monotonic()
    nova = chaos_client(redis_url, namespace, lease_ttl_s=3.0, heartbeat_interval_s=0.75)
    from nova_queue import TaskSpec

    job = nova.enqueue("synthetic", [TaskSpec(f"storm {i}", 0.001) for i in range(TASKS)],
                       max_attempts=10)
    seed = random.randrange(1 << 30)
    outs = [tmp_path / f"accepted{p}.jsonl" for p in range(PROCS)]
    procs = [subprocess.Popen([sys.executable, str(STORM), redis_url, namespace, job, str(p),
                               str(THREADS), str(seed), str(outs[p]), "120"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for p in range(PROCS)]
    try:
        codes = [p.wait(150) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    logs = "\n".join(p.stdout.read() for p in procs)
    assert codes == [0] * PROCS, f"seed {seed}\n{logs[-4000:]}"
    rows = [json.loads(line) for out in outs for line in out.read_text().splitlines()]
    via = collections.Counter(row.pop("via") for row in rows)
    assert via["complete"] > 0 and via["complete_claim"] > 0 and via["complete_batch"] > 0, \
        via  # every commit path raced
    accepted = [Accepted(**row) for row in rows]
    st = nova.job(job, with_tasks=False)
    assert st.finished, st
    verdict = check(nova, [job], accepted=accepted)
    assert not invariants(nova, [job])
    record(6, verdict, started)
    assert verdict.claims >= TASKS and verdict.rejected > 0 and verdict.requeued > 0, \
        verdict.summary()
    # the thread that died in each process is declared lost once its heartbeat runs out
    # (the job may finish sooner: idle workers back up the tasks it held)
    wait_for(lambda: nova.reap() is not None and sum(
        e.type == "worker_lost" for e in nova.events(count=1_000_000)) >= PROCS,
        timeout_s=storm.LEASE_TTL_S + 10, message="each dead storm thread declared lost")
    nova.close()
