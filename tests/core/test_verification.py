"""Results from workers that are not trusted are verified by re-running them elsewhere
(docs/SECURITY.md): a share of them is held (``verifying``) until another worker's run
agrees; a mismatch with a trusted worker discards the result, quarantines its maker,
resets its trust and re-runs every result it committed unverified; two untrusted results
that disagree wait for a trusted third opinion. Trust follows the identity across worker
ids. These tests drive the scripts as workers do (real Redis), with the verdicts a worker's
``same_result`` would give."""

from __future__ import annotations

import pytest
from novatests.leases import commit, events, join, rkey, setup_job, task_hash, worker_hash
from novatests.seed import set_speed
from novatests.verify import (
    AGREE,
    MISMATCH,
    TRUST_AFTER,
    held_one,
    new_worker,
    record,
    unsampled_commit,
    untrusted_check,
    verifier,
)

from nova_queue.client import BatchCommit


def test_a_new_workers_result_awaits_verification_and_stands_when_a_trusted_run_agrees(nova):
    job = setup_job(nova, 1)
    new_worker(nova, "tok.aaaaaaaaaaaa")
    verifier(nova, "direct")
    lease = held_one(nova, "tok.aaaaaaaaaaaa")
    t = task_hash(nova, lease.task_id)
    assert t["state"] == "verifying" and t["cand"] == rkey(lease)
    status = nova.job(job)
    assert (status.state, status.done, status.verifying, status.leased) == ("running", 0, 1, 0)
    assert status.tasks[0].candidates == ("tok.aaaaaaaaaaaa",)
    # the maker is never offered its own result; a verifier is, with the candidate's key
    assert nova.claim("tok.aaaaaaaaaaaa", "synthetic").status in ("wait", "empty")
    [check] = nova.claim("direct", "synthetic").leases
    assert check.task_id == lease.task_id and check.verify == {"cand": rkey(lease)}
    assert check.lease_gen > lease.lease_gen and check.attempt == lease.attempt
    done = nova.complete("direct", check, rkey(check), run_s=0.1, warm=True, meta=AGREE)
    assert done.job_finished
    t = task_hash(nova, lease.task_id)
    # the candidate's result stands, as its maker made it, verified by the verifier
    assert (t["state"], t["result"], t["worker"], t["verified_by"]) == (
        "done", rkey(lease), "tok.aaaaaaaaaaaa", "direct")
    assert "cand" not in t and "v_since_ms" not in t
    status = nova.job(job)
    assert (status.state, status.done, status.verifying) == ("done", 1, 0)
    assert record(nova, "tok.aaaaaaaaaaaa")["streak"] == "1"
    assert [e.fields["by"] for e in events(nova, "verified")] == ["direct"]
    [completed] = events(nova, "completed")
    assert completed.fields["worker"] == "tok.aaaaaaaaaaaa"
    assert [e.type for e in events(nova, "verifying", "verify_started")] == [
        "verifying", "verify_started"]


def test_a_trusted_workers_results_are_never_held(nova):
    setup_job(nova, 5)
    join(nova, "direct")  # no trust asked (an older release): trusted
    join(nova, "vouched", trust="trusted")
    for wid in ("direct", "vouched", "direct", "vouched", "direct"):
        [lease] = nova.claim(wid, "synthetic").leases
        commit(nova, wid, lease)
        assert task_hash(nova, lease.task_id)["state"] == "done"
    assert "trust" not in worker_hash(nova, "vouched")
    assert not events(nova, "verifying")


def test_a_mismatch_quarantines_the_maker_and_reruns_what_it_committed_unverified(nova):
    job = setup_job(nova, 8)
    liar = "tok.aaaaaaaaaaaa"
    new_worker(nova, liar)
    verifier(nova, "direct")
    # many agreements in a row: the liar is sampled rarely (VERIFY_FLOOR)
    nova.redis.hset(nova.keys.trust("tok"), mapping={"streak": 10**6})
    held, unverified = [], []
    for _ in range(6):
        [lease] = nova.claim(liar, "synthetic").leases
        commit(nova, liar, lease)
        state = task_hash(nova, lease.task_id)["state"]
        (held if state == "verifying" else unverified).append(lease.task_id)
        assert state in ("verifying", "done")
    assert nova.redis.zrange(nova.keys.unverified("tok"), 0, -1) == unverified
    # its next result is checked for sure (no agreement in a row), and it is a lie
    nova.redis.hset(nova.keys.trust("tok"), "streak", 0)
    last = held_one(nova, liar)
    held.append(last.task_id)
    seen = 0
    while nova.job(job).verifying:
        [check] = nova.claim("direct", "synthetic").leases
        assert check.verify
        nova.complete("direct", check, rkey(check), run_s=0.1, warm=True, meta=MISMATCH)
        t = task_hash(nova, check.task_id)
        # the trusted run's own result replaces the candidate
        assert (t["state"], t["result"], t["worker"]) == ("done", rkey(check), "direct")
        seen += 1
        assert seen <= len(held)
    assert seen == len(held)
    w = worker_hash(nova, liar)
    assert w["quarantined"] == "1" and "did not match that of direct" in w["quarantine_reason"]
    rec = record(nova, liar)
    assert (rec["level"], rec["streak"], rec["mismatches"]) == ("new", "0", str(len(held)))
    for tid in unverified:  # every unverified result of the liar runs again
        t = task_hash(nova, tid)
        assert t["state"] == "pending" and "result" not in t and t["error_kind"] == "invalidated"
    assert sorted(e.fields["task"] for e in events(nova, "invalidated")) == sorted(
        tid.split(":")[1] for tid in unverified)
    status = nova.job(job)
    assert status.done == len(held) and status.pending == 8 - len(held)
    assert nova.redis.zcard(nova.keys.unverified("tok")) == 0
    # the re-runs go to the honest worker and the job finishes without one of the liar's
    while not nova.job(job).finished:
        [lease] = nova.claim("direct", "synthetic").leases
        commit(nova, "direct", lease)
    assert {t.worker_id for t in nova.job(job).tasks} == {"direct"}


def test_a_caught_workers_results_are_all_checked_while_it_is_quarantined(nova):
    """Caught lying while it held more leases: their results are held for verification
    however its streak stands (checks of its earlier results that agreed may raise it
    after the catch); left unverified, they would stand, as no mismatch follows."""
    job = setup_job(nova, 4)
    liar = "tok.aaaaaaaaaaaa"
    new_worker(nova, liar)
    verifier(nova, "direct")
    set_speed(nova, liar, "synthetic", 0.01)
    leases = nova.claim(liar, "synthetic", 4).leases
    assert len(leases) == 4
    commit(nova, liar, leases[0])  # a new worker's first result: held, and a lie
    [check] = nova.claim("direct", "synthetic").leases
    nova.complete("direct", check, rkey(check), run_s=0.1, warm=True, meta=MISMATCH)
    assert worker_hash(nova, liar)["quarantined"] == "1"
    nova.redis.hset(nova.keys.trust("tok"), "streak", 10**6)  # sampled at VERIFY_FLOOR
    commit(nova, liar, leases[1])
    nova.complete_batch(liar, [BatchCommit(x, rkey(x), 0.01, True, {}) for x in leases[2:]])
    for lease in leases[1:]:
        assert task_hash(nova, lease.task_id)["state"] == "verifying", lease.task_id
    assert nova.redis.zcard(nova.keys.unverified("tok")) == 0
    assert nova.job(job).verifying == 3


def test_a_finished_job_with_a_withdrawn_result_runs_again(nova):
    liar = "tok.aaaaaaaaaaaa"
    new_worker(nova, liar)
    verifier(nova, "direct")
    job, first = unsampled_commit(nova, liar)
    assert nova.job(job).state == "done" and job in nova.redis.zrange(nova.keys.finished(), 0, -1)
    nova.redis.hset(nova.keys.trust("tok"), "streak", 0)  # its next result is checked
    setup_job(nova, 1)
    held_one(nova, liar)
    [check] = nova.claim("direct", "synthetic").leases
    nova.complete("direct", check, rkey(check), run_s=0.1, warm=True, meta=MISMATCH)
    status = nova.job(job)
    assert (status.state, status.done, status.pending, status.finished_ms) == (
        "running", 0, 1, None)
    assert job not in nova.redis.zrange(nova.keys.finished(), 0, -1)
    assert nova.redis.zscore(nova.keys.expiring(), job) is None
    # it runs again elsewhere and finishes again
    [again] = nova.claim("direct", "synthetic").leases
    assert again.task_id == first.task_id and again.attempt == 1
    assert commit(nova, "direct", again).job_finished


def test_two_untrusted_results_that_disagree_wait_for_a_trusted_third_opinion(nova):
    setup_job(nova, 1)
    new_worker(nova, "tok.aaaaaaaaaaaa")
    join(nova, "other.bbbbbbbbbbbb", trust="new", verifier="1")
    lease = held_one(nova, "tok.aaaaaaaaaaaa")
    # an untrusted verifier waits VERIFY_WAIT_MS for a trusted one first
    assert nova.claim("other.bbbbbbbbbbbb", "synthetic").status in ("wait", "empty")
    nova.redis.hset(nova.keys.task(lease.task_id), "v_since_ms", nova.server_time_ms() - 60_000)
    [second] = nova.claim("other.bbbbbbbbbbbb", "synthetic").leases
    assert second.verify == {"cand": rkey(lease)}
    assert not nova.complete("other.bbbbbbbbbbbb", second, rkey(second), run_s=0.1, warm=True,
                             meta=MISMATCH).job_finished
    t = task_hash(nova, lease.task_id)
    assert (t["state"], t["v_need"], t["cand2"], t["cand2_wid"]) == (
        "verifying", "trusted", rkey(second), "other.bbbbbbbbbbbb")
    assert "quarantined" not in worker_hash(nova, "tok.aaaaaaaaaaaa")  # no trusted word yet
    # only a trusted worker may decide, even after the wait
    nova.redis.hset(nova.keys.task(lease.task_id), "v_since_ms", nova.server_time_ms() - 60_000)
    join(nova, "third.cccccccccccc", trust="new", verifier="1")
    assert nova.claim("third.cccccccccccc", "synthetic").status in ("wait", "empty")
    verifier(nova, "direct")
    [third] = nova.claim("direct", "synthetic").leases
    assert third.verify == {"cand": rkey(lease), "cand2": rkey(second)}
    assert nova.complete("direct", third, rkey(third), run_s=0.1, warm=True,
                         meta={"verify": {"cand": "agree", "cand2": "mismatch"}}).job_finished
    t = task_hash(nova, lease.task_id)
    assert (t["state"], t["result"], t["worker"], t["verified_by"]) == (
        "done", rkey(lease), "tok.aaaaaaaaaaaa", "direct")
    assert worker_hash(nova, "other.bbbbbbbbbbbb")["quarantined"] == "1"
    assert "quarantined" not in worker_hash(nova, "tok.aaaaaaaaaaaa")
    assert record(nova, "tok.aaaaaaaaaaaa")["streak"] == "1"
    assert record(nova, "other.bbbbbbbbbbbb")["mismatches"] == "1"


def test_two_untrusted_results_that_agree_stand(nova):
    lease, second = untrusted_check(nova)
    assert nova.complete("other.bbbbbbbbbbbb", second, rkey(second), run_s=0.1, warm=True,
                         meta=AGREE).job_finished
    t = task_hash(nova, lease.task_id)
    assert (t["result"], t["verified_by"]) == (rkey(lease), "other.bbbbbbbbbbbb")


def test_an_earned_verifier_never_has_the_last_word(nova):
    """An identity that earned trust by agreeing could then blame honest workers: its word
    is an untrusted opinion, and a vouched worker decides."""
    setup_job(nova, 1)
    new_worker(nova, "tok.aaaaaaaaaaaa")
    join(nova, "patient.bbbbbbbbbbbb", trust="new", verifier="1")
    nova.redis.hset(nova.keys.trust("patient"), mapping={"level": "earned", "streak": 30})
    join(nova, "patient.bbbbbbbbbbbb", trust="new", verifier="1")  # registers as earned
    assert worker_hash(nova, "patient.bbbbbbbbbbbb")["trust"] == "earned"
    lease = held_one(nova, "tok.aaaaaaaaaaaa")
    assert nova.claim("patient.bbbbbbbbbbbb", "synthetic").status in ("wait", "empty")
    nova.redis.hset(nova.keys.task(lease.task_id), "v_since_ms", nova.server_time_ms() - 60_000)
    [second] = nova.claim("patient.bbbbbbbbbbbb", "synthetic").leases
    nova.complete("patient.bbbbbbbbbbbb", second, rkey(second), run_s=0.1, warm=True,
                  meta=MISMATCH)
    t = task_hash(nova, lease.task_id)
    assert (t["state"], t["v_need"], t["cand2_wid"]) == ("verifying", "trusted",
                                                         "patient.bbbbbbbbbbbb")
    assert "quarantined" not in worker_hash(nova, "tok.aaaaaaaaaaaa")
    assert record(nova, "tok.aaaaaaaaaaaa").get("mismatches", "0") == "0"


def test_an_untrusted_verifier_skips_results_of_its_own_owner(nova):
    setup_job(nova, 1)
    new_worker(nova, "tok.aaaaaaaaaaaa", owner="erin")
    verifier(nova, "direct")  # vouched: the result is held
    join(nova, "tok2.bbbbbbbbbbbb", trust="new", verifier="1", owner="erin")
    join(nova, "tok3.cccccccccccc", trust="new", verifier="1", owner="frank")
    lease = held_one(nova, "tok.aaaaaaaaaaaa")
    assert task_hash(nova, lease.task_id)["cand_owner"] == "erin"
    nova.redis.hset(nova.keys.task(lease.task_id), "v_since_ms", nova.server_time_ms() - 60_000)
    assert nova.claim("tok2.bbbbbbbbbbbb", "synthetic").status in ("wait", "empty")
    [check] = nova.claim("tok3.cccccccccccc", "synthetic").leases
    assert check.verify == {"cand": rkey(lease)}


def test_an_untrusted_verifier_that_says_nothing_hands_the_check_on(nova):
    """A verifier that is not vouched for and could not compare (no verdict) is no opinion,
    not a disagreement: the result awaits verification again (a trusted worker then
    settles it), counted as a verifier's failed run."""
    lease, second = untrusted_check(nova)
    assert not nova.complete("other.bbbbbbbbbbbb", second, rkey(second), run_s=0.1,
                             warm=True).job_finished
    t = task_hash(nova, lease.task_id)
    assert (t["state"], t["v_tries"], t["error_kind"], "cand2" in t) == (
        "verifying", "1", "no_verdict", False)
    assert worker_hash(nova, "other.bbbbbbbbbbbb")["verifies"] == "0"
    assert not nova.redis.sismember(nova.keys.held("other.bbbbbbbbbbbb"), lease.task_id)
    verifier(nova, "direct")
    [check] = nova.claim("direct", "synthetic").leases
    assert nova.complete("direct", check, rkey(check), run_s=0.1, warm=True,
                         meta=AGREE).job_finished
    assert task_hash(nova, lease.task_id)["result"] == rkey(lease)


def test_trust_is_earned_after_agreements_in_a_row_and_survives_new_worker_ids(nova):
    setup_job(nova, 2)
    new_worker(nova, "tok.aaaaaaaaaaaa")
    verifier(nova, "direct")
    assert worker_hash(nova, "tok.aaaaaaaaaaaa")["trust"] == "new"
    nova.redis.hset(nova.keys.trust("tok"), "streak", TRUST_AFTER - 1)
    # a re-registration under a new id resets nothing
    nova.deregister_worker("tok.aaaaaaaaaaaa")
    new_worker(nova, "tok.bbbbbbbbbbbb")
    assert record(nova, "tok.bbbbbbbbbbbb")["streak"] == str(TRUST_AFTER - 1)
    lease = nova.claim("tok.bbbbbbbbbbbb", "synthetic").leases[0]
    commit(nova, "tok.bbbbbbbbbbbb", lease)
    if task_hash(nova, lease.task_id)["state"] == "done":  # not sampled: sample the next
        nova.redis.hset(nova.keys.trust("tok"), "streak", 0)
        lease = held_one(nova, "tok.bbbbbbbbbbbb")
        nova.redis.hset(nova.keys.trust("tok"), "streak", TRUST_AFTER - 1)
    [check] = nova.claim("direct", "synthetic").leases
    nova.complete("direct", check, rkey(check), run_s=0.1, warm=True, meta=AGREE)
    assert record(nova, "tok.bbbbbbbbbbbb")["level"] == "earned"
    assert worker_hash(nova, "tok.bbbbbbbbbbbb")["trust"] == "earned"
    [trusted] = events(nova, "trusted")
    assert trusted.fields["ident"] == "tok"
    # the next worker id of the identity starts earned; asking for more changes nothing
    # only when the operator vouches (a gateway always asks for its token's trust)
    new_worker(nova, "tok.cccccccccccc")
    assert worker_hash(nova, "tok.cccccccccccc")["trust"] == "earned"
    info = {w.worker_id: w for w in nova.workers()}["tok.cccccccccccc"]
    assert (info.trust, info.vouched, info.verified) == ("trusted", False, 1)


def test_a_mismatch_resets_earned_trust(nova):
    setup_job(nova, 1)
    new_worker(nova, "tok.aaaaaaaaaaaa")
    verifier(nova, "direct")
    nova.redis.hset(nova.keys.trust("tok"), mapping={"level": "earned", "streak": 0})
    nova.redis.hset(nova.keys.worker("tok.aaaaaaaaaaaa"), "trust", "earned")
    for _ in range(200):  # earned: sampled at VERIFY_FLOOR; this job's one task until held
        lease = nova.claim("tok.aaaaaaaaaaaa", "synthetic").leases[0]
        commit(nova, "tok.aaaaaaaaaaaa", lease)
        if task_hash(nova, lease.task_id)["state"] == "verifying":
            break
        setup_job(nova, 1)
    else:
        pytest.fail("an earned worker's results were never sampled in 200 commits")
    [check] = nova.claim("direct", "synthetic").leases
    nova.complete("direct", check, rkey(check), run_s=0.1, warm=True, meta=MISMATCH)
    assert record(nova, "tok.aaaaaaaaaaaa")["level"] == "new"
    assert worker_hash(nova, "tok.aaaaaaaaaaaa")["trust"] == "new"


def test_a_batch_of_an_untrusted_worker_is_sampled_like_single_commits(nova):
    job = setup_job(nova, 4)
    new_worker(nova, "tok.aaaaaaaaaaaa")
    set_speed(nova, "tok.aaaaaaaaaaaa", "synthetic", 0.1)  # with no estimate it explores
    verifier(nova, "direct")
    leases = nova.claim("tok.aaaaaaaaaaaa", "synthetic", k=4).leases
    assert len(leases) == 4
    res = nova.complete_batch("tok.aaaaaaaaaaaa", [
        BatchCommit(lease, rkey(lease), run_s=0.1, warm=True) for lease in leases])
    assert res.committed == 4
    states = [task_hash(nova, lease.task_id)["state"] for lease in leases]
    # no agreement yet: every result is held
    assert states == ["verifying"] * 4
    assert nova.job(job).verifying == 4


def test_a_verifier_that_fails_hands_the_check_on_and_three_failures_fail_the_task(nova):
    job = setup_job(nova, 1)
    new_worker(nova, "tok.aaaaaaaaaaaa")
    verifier(nova, "direct")
    lease = held_one(nova, "tok.aaaaaaaaaaaa")
    for attempt in (1, 2, 3):
        [check] = nova.claim("direct", "synthetic").leases
        assert check.verify
        nova.fail("direct", check, "error", f"boom {attempt}")
        t = task_hash(nova, lease.task_id)
        assert t["v_tries"] == str(attempt)
        if attempt < 3:
            assert t["state"] == "verifying" and t["cand"] == rkey(lease)
    status = nova.job(job)
    assert (status.state, status.failed, status.verifying) == ("failed", 1, 0)
    assert "could not be verified" in task_hash(nova, lease.task_id)["error"]
    assert worker_hash(nova, "direct").get("verifies") == "0"


def test_a_cancelled_jobs_results_awaiting_verification_are_cancelled(nova):
    job = setup_job(nova, 1)
    new_worker(nova, "tok.aaaaaaaaaaaa")
    verifier(nova, "direct")
    held_one(nova, "tok.aaaaaaaaaaaa")
    nova.cancel(job)
    assert nova.claim("direct", "synthetic").status in ("wait", "empty")
    status = nova.job(job)
    assert (status.state, status.cancelled, status.verifying) == ("cancelled", 1, 0)
    assert status.finished


def test_an_agreement_does_not_clear_earlier_unverified_results(nova):
    """A liar that lies on one result and is honest on the next checked one is not washed
    clean: its earlier lie still runs again when it is caught later."""
    liar = "tok.aaaaaaaaaaaa"
    new_worker(nova, liar)
    verifier(nova, "direct")
    job, lie = unsampled_commit(nova, liar)
    nova.redis.hset(nova.keys.trust("tok"), "streak", 0)
    setup_job(nova, 1)
    held_one(nova, liar)
    [check] = nova.claim("direct", "synthetic").leases
    nova.complete("direct", check, rkey(check), run_s=0.1, warm=True, meta=AGREE)
    assert lie.task_id in nova.redis.zrange(nova.keys.unverified("tok"), 0, -1)
    nova.redis.hset(nova.keys.trust("tok"), "streak", 0)
    setup_job(nova, 1)
    held_one(nova, liar)
    [check] = nova.claim("direct", "synthetic").leases
    nova.complete("direct", check, rkey(check), run_s=0.1, warm=True, meta=MISMATCH)
    assert task_hash(nova, lie.task_id)["state"] == "pending"
    assert nova.job(job).state == "running"
