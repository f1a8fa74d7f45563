"""Blame follows the identity, not the process: a worker id is ``<identity>.<instance>``
(a gateway token's name; a direct worker's node and name), a task's failed_on lists
identities, and a new worker id of an identity takes over the previous one's quarantine and
failure streak. Re-registering, restarting or a new worker id clears none of it."""

from __future__ import annotations

from novatests.leases import commit, events, join, setup_job, task_hash, worker_hash
from novatests.seed import departed_long_ago, expire_worker, set_speed

from nova_queue import NovaClient
from nova_queue.keys import ident_of


def relaxed(nova, **settings) -> NovaClient:
    """The same client with other settings (the quarantine policy)."""
    return NovaClient(nova.redis, settings=nova.settings.__class__(
        **{**nova.settings.__dict__, **settings}))


def test_ident_of_matches_the_scripts():
    assert ident_of("alice.0123456789ab") == "alice"
    assert ident_of("team.gpu.0123456789ab") == "team.gpu"
    assert ident_of("0a1b2c3d-44556677.0123456789ab") == "0a1b2c3d-44556677"
    for own in ("plain", "a.", ".b", "0a1b2c3d-0123456789ab"):
        assert ident_of(own) == own


def test_a_failed_task_is_left_to_others_under_every_id_of_the_identity(nova):
    """The issue's probe: a token that fails a task and calls hello again (a fresh worker
    id) got the task again; its identity is on the task now."""
    setup_job(nova, 1, max_attempts=3)
    join(nova, "tok.aaaaaaaaaaaa")
    join(nova, "honest")
    lease = nova.claim("tok.aaaaaaaaaaaa", "synthetic").leases[0]
    nova.fail("tok.aaaaaaaaaaaa", lease, "error", "boom")
    assert task_hash(nova, lease.task_id)["failed_on"] == "tok"
    nova.deregister_worker("tok.aaaaaaaaaaaa")
    join(nova, "tok.bbbbbbbbbbbb")
    assert nova.claim("tok.bbbbbbbbbbbb", "synthetic").status == "wait"  # left to honest
    again = nova.claim("honest", "synthetic").leases[0]
    assert again.task_id == lease.task_id
    commit(nova, "honest", again)


def test_with_no_other_identity_live_the_task_may_run_here_again(nova):
    setup_job(nova, 1, max_attempts=3)
    join(nova, "tok.aaaaaaaaaaaa")
    lease = nova.claim("tok.aaaaaaaaaaaa", "synthetic").leases[0]
    nova.fail("tok.aaaaaaaaaaaa", lease, "error", "boom")
    join(nova, "tok.bbbbbbbbbbbb")  # the old id is still live too: one identity, two ids
    again = nova.claim("tok.bbbbbbbbbbbb", "synthetic").leases[0]
    assert again.task_id == lease.task_id and again.attempt == 2


def test_a_quarantine_passes_to_the_next_worker_id_of_the_identity(nova):
    join(nova, "tok.aaaaaaaaaaaa")
    join(nova, "good")
    assert nova.set_quarantine("tok.aaaaaaaaaaaa", True, reason="lied") == "quarantined"
    nova.deregister_worker("tok.aaaaaaaaaaaa")
    join(nova, "tok.bbbbbbbbbbbb")
    w = worker_hash(nova, "tok.bbbbbbbbbbbb")
    assert w["quarantined"] == "1" and w["quarantine_reason"] == "by an admin: lied"
    assert nova.eligible_workers("synthetic") == ["good"]
    setup_job(nova, 2)
    res = nova.claim("tok.bbbbbbbbbbbb", "synthetic")
    assert res.status == "quarantined" and "lied" in res.reason
    assert nova.redis.hget(nova.keys.idents(), "tok") == "tok.bbbbbbbbbbbb"


def test_a_failure_streak_goes_on_under_a_new_id_and_its_attempts_are_refunded(nova):
    """Two fast failures under one id, one more under the next: quarantined (fast_fails 3)
    while another worker succeeds, and the attempts of all three go back to their tasks."""
    nova = relaxed(nova, quarantine_fast_fails=3)
    setup_job(nova, 6, max_attempts=3)
    join(nova, "tok.aaaaaaaaaaaa")
    join(nova, "good")
    set_speed(nova, "tok.aaaaaaaaaaaa", "synthetic", 0.1)
    set_speed(nova, "good", "synthetic", 0.1)
    commit(nova, "good", nova.claim("good", "synthetic").leases[0])
    failed = []
    for _ in range(2):
        lease = nova.claim("tok.aaaaaaaaaaaa", "synthetic").leases[0]
        nova.fail("tok.aaaaaaaaaaaa", lease, "error", "x")
        failed.append(lease.task_id)
    nova.deregister_worker("tok.aaaaaaaaaaaa")
    join(nova, "tok.bbbbbbbbbbbb")
    set_speed(nova, "tok.bbbbbbbbbbbb", "synthetic", 0.1)
    assert worker_hash(nova, "tok.bbbbbbbbbbbb")["fast_streak"] == "2"
    lease = nova.claim("tok.bbbbbbbbbbbb", "synthetic").leases[0]
    nova.fail("tok.bbbbbbbbbbbb", lease, "error", "x")
    failed.append(lease.task_id)
    assert worker_hash(nova, "tok.bbbbbbbbbbbb")["quarantined"] == "1"
    assert [nova.task(t).attempt_count for t in failed] == [0, 0, 0]
    [ev] = events(nova, "worker_quarantined")
    assert ev.fields["worker"] == "tok.bbbbbbbbbbbb" and ev.fields["refunded"] == "3"


def test_a_task_that_fails_for_good_under_an_old_id_is_given_back(nova):
    """max_attempts 1: the old id's attempt failed the task for good; a quarantine of the
    new id (an admin's) gives it back, as it would for the old one."""
    job = setup_job(nova, 1, max_attempts=1)
    join(nova, "tok.aaaaaaaaaaaa")
    join(nova, "good")
    lease = nova.claim("tok.aaaaaaaaaaaa", "synthetic").leases[0]
    nova.fail("tok.aaaaaaaaaaaa", lease, "error", "boom")
    assert nova.task(lease.task_id).state == "failed"
    nova.deregister_worker("tok.aaaaaaaaaaaa")
    join(nova, "tok.bbbbbbbbbbbb")
    assert worker_hash(nova, "tok.bbbbbbbbbbbb")["streak_tids"] == lease.task_id
    nova.set_quarantine("tok.bbbbbbbbbbbb", True, reason="caught")
    assert nova.task(lease.task_id).state == "pending"
    commit(nova, "good", nova.claim("good", "synthetic").leases[0])
    assert nova.job(job, with_tasks=False).done == 1


def test_a_failure_blamed_after_a_commit_elsewhere_reaches_the_latest_id(nova):
    """Its failed tasks succeeding elsewhere quarantine the identity's current worker, not a
    departed id nobody uses."""
    nova = relaxed(nova, quarantine_after=2)
    setup_job(nova, 2, max_attempts=3)
    join(nova, "tok.aaaaaaaaaaaa")
    join(nova, "good")
    for _ in range(2):
        lease = nova.claim("tok.aaaaaaaaaaaa", "synthetic").leases[0]
        nova.fail("tok.aaaaaaaaaaaa", lease, "error", "bad")
    nova.deregister_worker("tok.aaaaaaaaaaaa")
    join(nova, "tok.bbbbbbbbbbbb")
    for _ in range(2):
        commit(nova, "good", nova.claim("good", "synthetic").leases[0])
    assert worker_hash(nova, "tok.bbbbbbbbbbbb").get("quarantined") == "1"
    assert "quarantined" not in worker_hash(nova, "tok.aaaaaaaaaaaa")


def test_the_retention_sweep_forgets_an_identity_with_its_last_worker(nova):
    join(nova, "tok.aaaaaaaaaaaa")
    nova.set_quarantine("tok.aaaaaaaaaaaa", True, reason="x")
    expire_worker(nova, "tok.aaaaaaaaaaaa")
    nova.reap()
    departed_long_ago(nova, "tok.aaaaaaaaaaaa")
    nova.expire()
    assert nova.redis.hget(nova.keys.idents(), "tok") is None
    assert not nova.redis.exists(nova.keys.worker("tok.aaaaaaaaaaaa"))
