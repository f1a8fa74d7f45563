"""Scenarios 2 and 4: commits raced and forged against the fenced scripts, from real clients
on separate connections (threads released together by a barrier)."""

from __future__ import annotations

import dataclasses
import random
import threading
import time

import pytest
from novatests.chaos.fleet import chaos_client
from novatests.chaos.history import Accepted, check, invariants
from novatests.seed import expire_lease

from nova_queue import TaskSpec
from nova_queue.errors import StaleResultError, TaskNotFoundError

RACES = 30
FORGERIES_PER_TASK = 12


def _key(lease, who: str) -> str:
    return f"jobs/{lease.job_id}/results/{lease.index:05d}-g{lease.lease_gen}-{who}.png"


def _commit(client, wid, lease, outcome, accepted, barrier):
    barrier.wait(10)
    key = _key(lease, lease.attempt_id)
    try:
        client.complete(wid, lease, key, run_s=0.01, warm=True)
    except StaleResultError:
        outcome[wid] = "stale"
        return
    outcome[wid] = "ok"
    accepted.append(Accepted(lease.task_id, wid, lease.lease_gen, lease.attempt_id, key))


def _claim(client, wid, out, barrier):
    barrier.wait(10)
    out.append(client.claim(wid, "synthetic"))


def _race(clients, wids, leases, accepted):
    outcome: dict[str, str] = {}
    barrier = threading.Barrier(len(wids))
    threads = [threading.Thread(target=_commit, args=(c, w, l, outcome, accepted, barrier))
               for c, w, l in zip(clients, wids, leases)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    return outcome


def test_old_and_new_lease_race_to_commit(redis_url, namespace, record):
    """Scenario 2: A's lease expired and B re-leased the task; both commit at once.
    Only B's commit may win, every time. Then the subtler race: A's lease expired but not
    yet reaped, and A commits while B claims: whichever Redis runs first wins, never both."""
    started = time.monotonic()
    a, b = chaos_client(redis_url, namespace), chaos_client(redis_url, namespace)
    accepted: list[Accepted] = []
    jobs = []
    try:
        for run in range(RACES):
            wa, wb = f"a{run}", f"b{run}"
            a.register_worker(wa, {"name": wa}, ["synthetic"])
            b.register_worker(wb, {"name": wb}, ["synthetic"])
            job = a.enqueue("synthetic", [TaskSpec(f"race {run}", 0.01)])
            jobs.append(job)
            old = a.claim(wa, "synthetic").leases[0]
            expire_lease(a, old.task_id)
            if run % 2 == 0:
                new = b.claim(wb, "synthetic").leases[0]
                assert (new.task_id, new.lease_gen) == (old.task_id, old.lease_gen + 1)
                outcome = _race([a, b], [wa, wb], [old, new], accepted)
                assert outcome == {wa: "stale", wb: "ok"}, outcome
            else:
                claimed: list = []
                barrier = threading.Barrier(2)
                outcome: dict[str, str] = {}
                tb = threading.Thread(target=_claim, args=(b, wb, claimed, barrier))
                ta = threading.Thread(target=_commit, args=(a, wa, old, outcome, accepted,
                                                            barrier))
                tb.start(), ta.start()
                tb.join(10), ta.join(10)
                got = claimed[0].leases
                if outcome[wa] == "ok":  # A ran first: nothing left for B
                    assert got == []
                else:  # B reaped and re-leased first: B commits
                    assert [x.lease_gen for x in got] == [old.lease_gen + 1]
                    _race([b], [wb], got, accepted)
        verdict = check(a, jobs, accepted=accepted, expect="done")
        assert not invariants(a, jobs)
        record(2, verdict, started, runs=RACES)
        assert verdict.rejected >= RACES // 2
    finally:
        a.close(), b.close()


def _forgeries(lease, rng):
    """Reports that must all be refused: (worker id, lease as sent, expected error)."""
    out = [
        ("mallory", lease, StaleResultError),
        ("nobody", lease, StaleResultError),
        ("w", dataclasses.replace(lease, lease_gen=lease.lease_gen + 1), StaleResultError),
        ("w", dataclasses.replace(lease, lease_gen=lease.lease_gen - 1), StaleResultError),
        ("w", dataclasses.replace(lease, attempt_id="forged"), StaleResultError),
        ("w", dataclasses.replace(lease, attempt_id=""), StaleResultError),
        ("w", dataclasses.replace(lease, task_id=f"{lease.job_id}:9999", index=9999),
         TaskNotFoundError),
        ("w", dataclasses.replace(lease, task_id="nojob:0", job_id="nojob", index=0),
         TaskNotFoundError),
    ]
    while len(out) < FORGERIES_PER_TASK:  # random mixes of wrong fields
        wid = rng.choice(["w", "mallory"])
        gen = lease.lease_gen + rng.choice([0, 1, 7, -1])
        aid = rng.choice([lease.attempt_id, lease.attempt_id[::-1], "x"])
        if (wid, gen, aid) != ("w", lease.lease_gen, lease.attempt_id):
            out.append((wid, dataclasses.replace(lease, lease_gen=gen, attempt_id=aid),
                        StaleResultError))
    return out


def test_forged_completions_and_failures_are_rejected(nova_chaos, record):
    """Scenario 4: every forged complete/fail is refused and changes nothing; the real
    commit then succeeds, its replay answers ALREADY, and forgeries after it stay refused."""
    started = time.monotonic()
    nova = nova_chaos
    rng = random.Random(4)
    job = nova.enqueue("synthetic", [TaskSpec(f"forge {i}", 0.01) for i in range(10)])
    nova.register_worker("w", {"name": "w"}, ["synthetic"])
    nova.register_worker("mallory", {"name": "mallory"}, ["synthetic"])
    accepted: list[Accepted] = []
    refused = 0
    for _ in range(10):
        lease = nova.claim("w", "synthetic").leases[0]
        before = nova.redis.hgetall(nova.keys.task(lease.task_id))
        for wid, forged, error in _forgeries(lease, rng):
            with pytest.raises(error):
                nova.complete(wid, forged, _key(forged, "forged"), run_s=0.01, warm=True)
            with pytest.raises(error):
                nova.fail(wid, forged, rng.choice(["error", "oom", "infra", "shutdown"]), "x")
            refused += 2
        renewed = nova.renew("mallory", [lease])
        assert renewed.lost == [lease.task_id]  # another worker cannot extend the lease
        assert nova.redis.hgetall(nova.keys.task(lease.task_id)) == before
        key = _key(lease, lease.attempt_id)
        assert not nova.complete("w", lease, key, run_s=0.01, warm=True).replayed
        accepted.append(Accepted(lease.task_id, "w", lease.lease_gen, lease.attempt_id, key))
        assert nova.complete("w", lease, key, run_s=0.01, warm=True).replayed  # idempotent
        for wid, forged, error in [("w", lease, StaleResultError),
                                   ("mallory", lease, StaleResultError)]:
            with pytest.raises(error):  # same lease, other result key / other worker
                nova.complete(wid, forged, _key(lease, "other"), run_s=0.01, warm=True)
            refused += 1
        with pytest.raises(StaleResultError):
            nova.fail("w", lease, "error", "late failure after the commit")
        refused += 1
    verdict = check(nova, [job], accepted=accepted, expect="done")
    assert not invariants(nova, [job])
    record(4, verdict, started)
    # unknown-task forgeries have no task to attach an event to: 4 per lease
    assert verdict.rejected == refused - 10 * 4
