"""One process of the claim storm (scenario 6): THREADS workers, each its own worker id,
claiming 1-3 tasks at a time as fast as Redis answers, then committing, failing,
committing late (a zombie past its TTL) or abandoning each lease at random. Half of the
commits of a claim's last lease also claim the next tasks in the same call
(complete_and_claim), as the worker runtime does; a third of the claims commit their leases
in one complete_batch call (with or without the next claim), as the worker commits a run of
cheap tasks. One thread per
process "dies" part way: it stops renewing while holding leases.

Usage: python tests/lib/novatests/chaos/storm.py \
    REDIS_URL NAMESPACE JOB PROC THREADS SEED OUT_JSONL DEADLINE_S
Every commit the client saw accepted is written to OUT_JSONL, one JSON object per line.
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time

from nova_queue import NovaClient
from nova_queue.client import BatchCommit
from nova_queue.errors import StaleResultError, WorkerLostError

LEASE_TTL_S = 3.0


def work(client: NovaClient, job: str, wid: str, rng: random.Random, out: list,
         deadline: float, dies_after: int | None) -> None:
    client.register_worker(wid, {"name": wid}, ["synthetic"])
    held: dict[str, object] = {}
    zombies: list[tuple[float, object]] = []
    claims = 0
    carried = None  # what a commit-and-claim answered: the next claim
    while time.monotonic() < deadline:
        if dies_after is not None and claims >= dies_after:
            return  # stops renewing with leases in hand: declared lost later
        renewed = client.renew(wid, list(held.values()))
        if renewed.worker_lost:
            held.clear()
            client.register_worker(wid, {"name": wid}, ["synthetic"])
        for tid in renewed.lost:
            held.pop(tid, None)
        try:
            res, carried = carried or client.claim(wid, "synthetic", rng.randint(1, 3)), None
        except WorkerLostError:
            client.register_worker(wid, {"name": wid}, ["synthetic"])
            continue
        claims += len(res.leases)
        carried = dispose(client, wid, res.leases, rng, out, zombies)
        now = time.monotonic()
        for due, lease in [z for z in zombies if z[0] <= now]:
            zombies.remove((due, lease))
            commit(client, wid, lease, out)
        if res.status != "ok":
            if client.job(job, with_tasks=False).finished:
                return
            time.sleep(min(max(res.retry_after_s, 0.02), 0.2))


def dispose(client: NovaClient, wid: str, leases: list, rng: random.Random, out: list,
            zombies: list[tuple[float, object]]):
    """Each lease of a claim, at random: committed (alone, or with others in one batch),
    failed, kept for a late commit (``zombies``) or abandoned. Returns the next claim a
    commit made, if any."""
    carried = None
    batch: list | None = [] if rng.random() < 0.35 else None
    for lease in leases:
        roll = rng.random()
        if roll < 0.75 and batch is not None:
            batch.append(lease)
        elif roll < 0.75:
            then_claim = lease is leases[-1] and rng.random() < 0.5
            carried = commit(client, wid, lease, out, rng.randint(1, 3) if then_claim else None)
        elif roll < 0.85:
            kind = "error" if roll < 0.80 else "infra"
            try:
                client.fail(wid, lease, kind, "storm failure")
            except StaleResultError:
                pass
        elif roll < 0.95:  # commit only after the lease expired (never renewed)
            zombies.append((time.monotonic() + LEASE_TTL_S + rng.uniform(0.2, 1.0), lease))
        # else: abandoned; the lease expires and is reaped
    if batch:
        carried = commit_batch(client, wid, batch, out,
                               rng.randint(1, 3) if rng.random() < 0.5 else None)
    return carried


def commit(client: NovaClient, wid: str, lease, out: list, then_claim: int | None = None):
    """Commit; with ``then_claim`` (k), also claim k tasks in the same call and return
    that claim's answer (None when not, or when the worker must register again)."""
    key = f"jobs/{lease.job_id}/results/{lease.index:05d}-g{lease.lease_gen}-{lease.attempt_id}.png"
    nxt = None
    try:
        if then_claim is None:
            client.complete(wid, lease, key, run_s=0.002, warm=True)
        else:
            _, nxt = client.complete_and_claim(wid, lease, key, run_s=0.002, warm=True,
                                               k=then_claim)
    except StaleResultError:
        return None
    out.append({"task_id": lease.task_id, "worker_id": wid, "lease_gen": lease.lease_gen,
                "attempt_id": lease.attempt_id, "result_key": key,
                "via": "complete" if then_claim is None else "complete_claim"})
    return nxt


def commit_batch(client: NovaClient, wid: str, leases: list, out: list,
                 then_claim: int | None = None):
    """Commit ``leases`` in one complete_batch call; with ``then_claim`` (k), claim k tasks
    in the same call and return that claim's answer."""
    commits = [BatchCommit(x, f"jobs/{x.job_id}/results/{x.index:05d}-g{x.lease_gen}-"
                              f"{x.attempt_id}.png", 0.002, True) for x in leases]
    res = client.complete_batch(wid, commits, app="synthetic" if then_claim else None,
                                k=then_claim or 1)
    for c, r in zip(commits, res.results):
        if not isinstance(r, Exception):
            out.append({"task_id": c.lease.task_id, "worker_id": wid,
                        "lease_gen": c.lease.lease_gen, "attempt_id": c.lease.attempt_id,
                        "result_key": c.result_key, "via": "complete_batch"})
    return res.claimed


def main(argv: list[str]) -> int:
    url, namespace, job, proc, threads, seed, out_path, deadline_s = argv
    client = NovaClient.from_url(url, namespace=namespace, lease_ttl_s=LEASE_TTL_S,
                                 heartbeat_interval_s=0.75, events_maxlen=10_000_000)
    deadline = time.monotonic() + float(deadline_s)
    out: list[dict] = []
    errors: list[BaseException] = []

    def run(i: int) -> None:
        rng = random.Random(f"{seed}-{proc}-{i}")
        try:
            work(client, job, f"p{proc}t{i}", rng, out, deadline, 40 if i == 0 else None)
        except BaseException as exc:
            errors.append(exc)
            raise

    pool = [threading.Thread(target=run, args=(i,)) for i in range(int(threads))]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    with open(out_path, "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(row) + "\n" for row in out)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
