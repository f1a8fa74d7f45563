"""No free loops: a task handed back without a result and without using an attempt (fail
kind infra or shutdown, a worker leaving) is free a few times per task and per worker in a
window; past that, while other workers succeed, it counts as a failure of that worker (an
attempt, its failure streak, a quarantine). While nobody succeeds (a store outage of the
whole pool) it stays free."""

from __future__ import annotations

from novatests.leases import commit, join, setup_job, task_hash, worker_hash
from novatests.seed import set_speed

from nova_queue import NovaClient

PER_TASK, PER_WINDOW, WINDOW_MS = 3, 64, 60_000  # common.lua FREE_BACKS_*, FREE_WINDOW_MS


def fast_fails(nova, n=3) -> NovaClient:
    return NovaClient(nova.redis, settings=nova.settings.__class__(
        **{**nova.settings.__dict__, "quarantine_fast_fails": n}))


def loop(nova, wid, kind, rounds):
    """claim -> fail(kind) -> claim ..., the issue's probe; the task of each round."""
    tids = []
    for _ in range(rounds):
        res = nova.claim(wid, "synthetic")
        if not res.leases:
            break
        nova.fail(wid, res.leases[0], kind, "result store unavailable")
        tids.append(res.leases[0].task_id)
    return tids


def test_an_infra_loop_beside_a_worker_that_succeeds_ends_in_quarantine(nova):
    """claim -> fail(infra) -> claim held a task forever. Now each task is free PER_TASK
    times, then the hand-back counts as the liar's failure and leaves the task to others;
    three such in a row quarantine the liar (fast_fails 3), which gives the attempts back."""
    nova = fast_fails(nova)
    setup_job(nova, 6, max_attempts=3)
    join(nova, "liar")
    join(nova, "honest")
    set_speed(nova, "liar", "synthetic", 0.1)
    set_speed(nova, "honest", "synthetic", 0.1)
    commit(nova, "honest", nova.claim("honest", "synthetic").leases[0])  # the pool works
    tids = loop(nova, "liar", "infra", 50)
    assert len(tids) == 3 * (PER_TASK + 1)  # then quarantined: no more claims
    assert [tids.count(t) for t in dict.fromkeys(tids)] == [PER_TASK + 1] * 3
    w = worker_hash(nova, "liar")
    assert w["quarantined"] == "1" and "handed back without a result too often (infra)" in w[
        "quarantine_reason"]
    for tid in set(tids):
        t = task_hash(nova, tid)
        assert t["state"] == "pending" and t["attempt_count"] == "0"  # refunded
        assert t["failed_on"] == "liar" and int(t["free_backs"]) == PER_TASK + 1
    leases = nova.claim("honest", "synthetic", k=5).leases
    assert set(tids) <= {lease.task_id for lease in leases}


def test_infra_failures_stay_free_while_no_worker_succeeds(nova):
    """The result store down for everyone: the pool is failing, not the worker."""
    setup_job(nova, 1, max_attempts=2)
    join(nova, "a")
    join(nova, "b")
    tids = loop(nova, "a", "infra", 8) + loop(nova, "b", "infra", 4)
    assert len(tids) == 12
    t = task_hash(nova, tids[0])
    assert (t["state"], t["attempt_count"]) == ("pending", "0")
    assert "quarantined" not in worker_hash(nova, "a")


def test_the_window_counts_one_workers_free_hand_backs_across_tasks(nova):
    nova = fast_fails(nova, 0)  # no quarantine: look at the attempts alone
    setup_job(nova, PER_WINDOW + 2, max_attempts=3)
    join(nova, "liar")
    join(nova, "honest")
    set_speed(nova, "liar", "synthetic", 0.1)
    set_speed(nova, "honest", "synthetic", 0.1)
    commit(nova, "honest", nova.claim("honest", "synthetic").leases[0])
    leases = []
    while len(leases) < PER_WINDOW + 1:
        leases += nova.claim("liar", "synthetic", k=64).leases
    for lease in leases:
        nova.fail("liar", lease, "shutdown", "stopping")
    attempts = [int(task_hash(nova, lease.task_id)["attempt_count"]) for lease in leases]
    assert attempts == [0] * PER_WINDOW + [1]
    w = worker_hash(nova, "liar")
    assert int(w["free_n"]) == PER_WINDOW + 1
    # a new window: free again
    nova.redis.hset(nova.keys.worker("liar"), "free_since_ms", nova.server_time_ms() - WINDOW_MS)
    lease = nova.claim("liar", "synthetic").leases[0]
    nova.fail("liar", lease, "infra", "x")
    assert worker_hash(nova, "liar")["free_n"] == "1"
    assert task_hash(nova, lease.task_id)["attempt_count"] == "0"


def test_leaving_and_coming_back_with_a_task_is_no_free_loop_either(nova):
    """A token's hello deregisters its previous process: its leases go back for free. Doing
    that again and again with the same task costs an attempt past the cap."""
    setup_job(nova, 2, max_attempts=5)
    join(nova, "tok.aaaaaaaaaaaa")
    join(nova, "honest")
    set_speed(nova, "honest", "synthetic", 0.1)
    commit(nova, "honest", nova.claim("honest", "synthetic").leases[0])
    attempts = []
    for i in range(PER_TASK + 2):
        wid = f"tok.{i:012d}"
        join(nova, wid)
        lease = nova.claim(wid, "synthetic").leases[0]
        nova.deregister_worker(wid)
        attempts.append(int(task_hash(nova, lease.task_id)["attempt_count"]))
    assert attempts == [0] * PER_TASK + [1, 2]


def test_a_forged_counter_does_not_break_the_fail_call(nova):
    setup_job(nova, 1)
    join(nova, "w")
    lease = nova.claim("w", "synthetic").leases[0]
    nova.redis.hset(nova.keys.task(lease.task_id), "free_backs", "nan")
    nova.redis.hset(nova.keys.worker("w"), mapping={"free_n": "[1]", "free_since_ms": "inf"})
    nova.fail("w", lease, "infra", "x")
    t = task_hash(nova, lease.task_id)
    assert (t["state"], t["attempt_count"], t["free_backs"]) == ("pending", "0", "1")
    assert worker_hash(nova, "w")["free_n"] == "1"
