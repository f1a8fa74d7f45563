"""Verification when the pool cannot verify (docs/SECURITY.md): no verifier live (nothing is
held; a held result whose verifiers left stands after VERIFY_ORPHAN_MS), no trusted one to
settle two untrusted results that disagree, an app whose results do not compare; the bound
on an identity's unverified results; NOVA_TRUST. Through the real scripts."""

from __future__ import annotations

import pytest
from novatests.leases import commit, events, join, rkey, setup_job, task_hash
from novatests.verify import (
    MISMATCH,
    held_one,
    new_worker,
    unsampled_commit,
    verifier,
    waited_long,
)


def test_with_no_verifier_results_stand_unverified_at_once_until_one_registers(nova):
    """A pool of gateway workers only: nobody can verify, so nothing waits; each result
    stands unverified (a later mismatch re-runs it) until a verifier registers."""
    job = setup_job(nova, 2)
    new_worker(nova, "tok.aaaaaaaaaaaa")
    [lease] = nova.claim("tok.aaaaaaaaaaaa", "synthetic").leases
    commit(nova, "tok.aaaaaaaaaaaa", lease)
    t = task_hash(nova, lease.task_id)
    assert (t["state"], t["result"], t["worker"]) == ("done", rkey(lease), "tok.aaaaaaaaaaaa")
    assert nova.redis.zrange(nova.keys.unverified("tok"), 0, -1) == [lease.task_id]
    assert nova.redis.hget(nova.keys.meta(), "noverify:synthetic")
    verifier(nova, "direct")  # results are held again
    assert not nova.redis.hget(nova.keys.meta(), "noverify:synthetic")
    held_one(nova, "tok.aaaaaaaaaaaa")
    [check] = nova.claim("direct", "synthetic").leases
    nova.complete("direct", check, rkey(check), run_s=0.1, warm=True, meta=MISMATCH)
    assert task_hash(nova, lease.task_id)["state"] == "pending"  # it ran again
    assert nova.job(job).state == "running"


def test_a_held_result_whose_verifiers_left_stands_unverified(nova):
    job = setup_job(nova, 1)
    new_worker(nova, "tok.aaaaaaaaaaaa")
    verifier(nova, "direct")
    lease = held_one(nova, "tok.aaaaaaaaaaaa")
    nova.deregister_worker("direct")
    nova.claim("tok.aaaaaaaaaaaa", "synthetic")  # too early: nothing happens
    assert task_hash(nova, lease.task_id)["state"] == "verifying"
    waited_long(nova, lease.task_id)
    nova.claim("tok.aaaaaaaaaaaa", "synthetic")
    t = task_hash(nova, lease.task_id)
    assert (t["state"], t["result"], t["worker"]) == ("done", rkey(lease), "tok.aaaaaaaaaaaa")
    assert "verified_by" not in t and "cand" not in t
    status = nova.job(job)
    assert (status.state, status.done, status.verifying) == ("done", 1, 0)
    assert nova.redis.zrange(nova.keys.unverified("tok"), 0, -1) == [lease.task_id]
    assert [e.fields["state"] for e in events(nova, "unverified")] == ["done"]


def test_a_live_verifier_keeps_an_old_result_awaiting_verification(nova):
    setup_job(nova, 1)
    new_worker(nova, "tok.aaaaaaaaaaaa")
    verifier(nova, "direct")
    lease = held_one(nova, "tok.aaaaaaaaaaaa")
    waited_long(nova, lease.task_id)
    nova.claim("tok.aaaaaaaaaaaa", "synthetic")
    assert task_hash(nova, lease.task_id)["state"] == "verifying"
    assert nova.redis.zscore(nova.keys.verify("synthetic"), lease.task_id) > 0  # looked at


def test_two_disagreeing_results_with_no_trusted_worker_live_fail(nova):
    job = setup_job(nova, 1)
    new_worker(nova, "tok.aaaaaaaaaaaa")
    join(nova, "other.bbbbbbbbbbbb", trust="new", verifier="1")
    lease = held_one(nova, "tok.aaaaaaaaaaaa")
    nova.redis.hset(nova.keys.task(lease.task_id), "v_since_ms", nova.server_time_ms() - 60_000)
    [second] = nova.claim("other.bbbbbbbbbbbb", "synthetic").leases
    nova.complete("other.bbbbbbbbbbbb", second, rkey(second), run_s=0.1, warm=True,
                  meta=MISMATCH)
    waited_long(nova, lease.task_id)  # a verifier is live, but none that is trusted
    nova.claim("tok.aaaaaaaaaaaa", "synthetic")
    t = task_hash(nova, lease.task_id)
    assert (t["state"], t["error_kind"]) == ("failed", "unverified")
    status = nova.job(job)
    assert (status.state, status.failed, status.verifying) == ("failed", 1, 0)


def test_nova_trust_is_checked():
    from nova_queue.errors import ConfigError
    from nova_queue.settings import Settings

    assert Settings().trust == "trusted"
    assert Settings.from_env(environ={"NOVA_TRUST": "new"}).trust == "new"
    with pytest.raises(ConfigError, match="trust must be one of trusted, new, not 'maybe'"):
        Settings.from_env(environ={"NOVA_TRUST": "maybe"})


def test_an_identity_keeps_its_latest_unverified_results_only(nova):
    new_worker(nova, "tok.aaaaaaaaaaaa")
    key = nova.keys.unverified("tok")
    nova.redis.zadd(key, {f"old:{i}": i for i in range(1024)})
    _, lease = unsampled_commit(nova, "tok.aaaaaaaaaaaa")
    kept = nova.redis.zrange(key, 0, -1)
    assert len(kept) == 1024 and kept[-1] == lease.task_id and "old:0" not in kept


def test_an_app_whose_results_do_not_compare_is_only_validated(nova):
    """A vouched worker says the app's results cannot be compared: untrusted results of it
    are not held (they stand, listed as unverified); a vouched worker whose app compares,
    not an untrusted one, lifts the mark."""
    meta = nova.keys.meta()
    join(nova, "direct", verifier="1", nocompare="other,synthetic")
    assert nova.redis.hget(meta, "noverify:synthetic") == "nocompare"
    new_worker(nova, "tok.aaaaaaaaaaaa", verifier="1")  # an untrusted word changes nothing
    join(nova, "liar.bbbbbbbbbbbb", trust="new", verifier="1")
    assert nova.redis.hget(meta, "noverify:synthetic") == "nocompare"
    setup_job(nova, 1)
    [lease] = nova.claim("tok.aaaaaaaaaaaa", "synthetic").leases
    assert commit(nova, "tok.aaaaaaaaaaaa", lease).job_finished  # streak 0, yet not held
    assert nova.redis.zrange(nova.keys.unverified("tok"), 0, -1) == [lease.task_id]
    join(nova, "direct")  # re-registered without the mark: its app compares now
    assert nova.redis.hget(meta, "noverify:synthetic") is None


def test_the_doctor_knows_a_result_awaiting_verification(nova):
    """A held task is in its app's verify set and counted in its job's ``verifying``: the
    doctor finds nothing; taken out of the set, it says so."""
    from nova_queue import doctor

    setup_job(nova, 2)
    new_worker(nova, "tok.aaaaaaaaaaaa")
    verifier(nova, "direct")
    lease = held_one(nova, "tok.aaaaaaaaaaaa")
    assert [f.message for f in doctor.run(nova).findings if f.severity == "problem"] == []
    nova.redis.zrem(nova.keys.verify("synthetic"), lease.task_id)
    found = [f.message for f in doctor.run(nova).findings]
    assert f"task {lease.task_id} is verifying but not in its app's verify set" in found
