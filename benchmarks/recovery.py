"""Recovery: ``kill -9`` of a worker holding a lease → the task claimed again by another
worker, for lease TTLs of 3, 5 and 10 s (heartbeat every TTL/5).

Two real workers wait, one task (longer than the test) is enqueued; one worker leases it;
after a random fraction of a heartbeat interval (so the kill lands anywhere between two
renewals) it is killed. Recovery = the task's next ``claimed`` event (lease_gen 2) − the
kill; detection = its ``requeued`` event − the kill (the reap, done lazily by the other
worker's claim). Expected: at most TTL + the idle claim interval.
"""

from __future__ import annotations

import random
import time
import uuid
from pathlib import Path
from typing import Any

from benchlib import log, median
from fleet import start_nova_worker, stop_all

from nova_queue import NovaClient, TaskSpec
from nova_queue.local import RedisServer, wait_for


def recover_once(server: RedisServer, folder: Path, lease_ttl_s: float,
                 rng: random.Random) -> dict[str, float]:
    """One kill; returns recovery and detection seconds."""
    ns = f"rec-{lease_ttl_s:g}-{uuid.uuid4().hex[:6]}"
    heartbeat_s = lease_ttl_s / 5
    client = NovaClient.from_url(server.url, namespace=ns, lease_ttl_s=lease_ttl_s,
                                 heartbeat_interval_s=heartbeat_s)
    store = f"file://{folder}/store-{ns}"
    procs = {name: start_nova_worker(server.url, ns, store, folder / ns, name, 1.0,
                                     lease_ttl_s=lease_ttl_s, heartbeat_s=heartbeat_s,
                                     extra=("--no-benchmark",))
             for name in ("a", "b")}
    try:
        names = {}

        def joined() -> bool:
            for e in client.events(count=100):
                if e.type == "worker_joined":
                    names[e.fields["worker"]] = e.fields["name"]
            return len(names) == 2

        wait_for(joined, 120, 0.05, "two recovery workers to join")
        job = client.enqueue("synthetic", [TaskSpec("hold me", 1.0)],
                             params={"seconds": lease_ttl_s * 3 + 30})
        claim = wait_for(lambda: [e for e in client.events(count=100) if e.type == "claimed"],
                         60, 0.05, "the task to be leased")[0]
        holder = procs[names[claim.fields["worker"]]]
        time.sleep(rng.uniform(0, heartbeat_s))  # the kill's phase between two renewals
        killed_at = holder.kill9()

        def reclaimed() -> Any:
            return [e for e in client.events(claim.id, count=100)
                    if e.type == "claimed" and e.fields.get("job") == job]

        again = wait_for(reclaimed, lease_ttl_s * 3 + 30, 0.05,
                         "the task to be claimed again")[0]
        requeued = [e for e in client.events(claim.id, count=100) if e.type == "requeued"]
    finally:
        stop_all(list(procs.values()))
    client.close()
    return {"lease_ttl_s": lease_ttl_s, "heartbeat_s": heartbeat_s,
            "recovery_s": again.ts_ms / 1000 - killed_at,
            "detection_s": (requeued[0].ts_ms / 1000 - killed_at) if requeued else float("nan"),
            "lease_gen": int(again.fields["lease_gen"])}


def run_section(server: RedisServer, folder: Path, *, quick: bool, repeats: int | None = None,
                ttls_s: tuple[float, ...] = (3.0, 5.0, 10.0)) -> dict[str, Any]:
    """Each TTL once (quick) or three times; medians and maxima."""
    repeats = repeats or (1 if quick else 3)
    rng = random.Random(7)
    rows = []
    for ttl in ttls_s:
        runs = []
        for rep in range(repeats):
            runs.append(recover_once(server, folder, ttl, rng))
            log(f"recovery: TTL {ttl:g} s ({rep + 1}/{repeats}): {runs[-1]['recovery_s']:.2f} s")
        rows.append({"lease_ttl_s": ttl, "heartbeat_s": ttl / 5,
                     "recovery_s": median([x["recovery_s"] for x in runs]),
                     "max_recovery_s": max(x["recovery_s"] for x in runs),
                     "detection_s": median([x["detection_s"] for x in runs]),
                     "runs": runs})
    return {"lease_ttl_s": [x["lease_ttl_s"] for x in rows],
            "recovery_s": [x["recovery_s"] for x in rows],
            "max_recovery_s": [x["max_recovery_s"] for x in rows], "rows": rows,
            "repeats": repeats}
