"""Backup attempts as free samples (docs/SECURITY.md, verification): when a worker that is
not vouched for commits a task first while a vouched verifier runs the task's backup
attempt, that backup becomes the result's verification instead of being dropped: the
result is held as the candidate, the backup's run compares and its commit settles it as a
verification's does. No extra run is made for the sample."""

from __future__ import annotations

from novatests.leases import backdate, commit, events, join, rkey, setup_job, task_hash, worker_hash
from novatests.seed import expire_worker, set_speed
from novatests.verify import AGREE, MISMATCH, record

from nova_queue.workers.transport import DirectTransport

SLOW = "tok.aaaaaaaaaaaa"


def backed_up(nova, *, fast_trust: str | None = None):
    """A task the new worker SLOW runs slowly and a verifier "fast" backs up: (job, the
    primary lease, the backup lease)."""
    job = setup_job(nova, 1, cost=1.0)
    join(nova, SLOW, trust="new")
    set_speed(nova, SLOW, "synthetic", 0.5)
    primary = nova.claim(SLOW, "synthetic").leases[0]
    join(nova, "fast", verifier="1", **({"trust": fast_trust} if fast_trust else {}))
    set_speed(nova, "fast", "synthetic", 0.2)
    backdate(nova, primary.task_id, 5_000)
    [backup] = nova.claim("fast", "synthetic").leases
    assert backup.backup and backup.task_id == primary.task_id
    return job, primary, backup


def test_the_backup_of_a_new_workers_task_verifies_its_result(nova):
    job, primary, backup = backed_up(nova)
    res = commit(nova, SLOW, primary)
    assert res.job_finished is False
    h = task_hash(nova, primary.task_id)
    assert (h["state"], h["worker"], h["lease_gen"], h["cand"], h["cand_wid"]) == (
        "leased", "fast", str(backup.lease_gen), rkey(primary), SLOW)
    assert not any(f.startswith("b_") for f in h)
    assert worker_hash(nova, "fast")["verifies"] == "1"
    assert nova.redis.zscore(nova.keys.verify("synthetic"), primary.task_id) is None  # no rerun
    assert not nova.redis.sismember(nova.keys.held(SLOW), primary.task_id)
    [started] = events(nova, "verify_started")
    assert (started.fields["worker"], started.fields["of"], started.fields["free"]) == (
        "fast", SLOW, "1")
    assert nova.job(job).verifying == 1
    # the maker's commit sent again (a lost reply) took effect: no refusal, nothing deleted
    assert commit(nova, SLOW, primary).replayed
    # the backup's run finds the candidate before it commits (workers/outputs.py)
    direct = DirectTransport(nova, nova.settings)
    assert direct.verification(backup) == {"cand": rkey(primary)}
    assert direct.verification(primary) is None
    assert nova.renew("fast", [backup]).lost == []
    assert nova.complete("fast", backup, rkey(backup), run_s=0.2, warm=True,
                         meta=AGREE).job_finished
    t = task_hash(nova, primary.task_id)
    assert (t["state"], t["result"], t["worker"], t["verified_by"]) == (
        "done", rkey(primary), SLOW, "fast")
    assert record(nova, SLOW)["streak"] == "1"
    assert worker_hash(nova, "fast")["verifies"] == "0"
    assert nova.job(job).verifying == 0


def test_a_free_sample_catches_a_liar(nova):
    job, primary, backup = backed_up(nova)
    commit(nova, SLOW, primary)
    nova.complete("fast", backup, rkey(backup), run_s=0.2, warm=True, meta=MISMATCH)
    t = task_hash(nova, primary.task_id)
    assert (t["state"], t["result"], t["worker"]) == ("done", rkey(backup), "fast")
    assert worker_hash(nova, SLOW)["quarantined"] == "1"
    assert record(nova, SLOW)["mismatches"] == "1"
    assert nova.job(job).state == "done"


def test_a_free_sample_whose_verifier_is_lost_awaits_another(nova):
    _, primary, _ = backed_up(nova)
    commit(nova, SLOW, primary)
    expire_worker(nova, "fast")
    nova.reap()
    h = task_hash(nova, primary.task_id)
    assert (h["state"], h["cand_wid"]) == ("verifying", SLOW)
    assert nova.redis.zscore(nova.keys.verify("synthetic"), primary.task_id) is not None


def test_no_free_sample_from_a_backup_that_is_not_vouched_for(nova):
    """A new verifier's word could not settle the result alone: the backup is dropped as
    usual and the result is sampled the usual way."""
    _, primary, _ = backed_up(nova, fast_trust="new")
    commit(nova, SLOW, primary)
    h = task_hash(nova, primary.task_id)
    assert h["state"] == "verifying" and "b_worker" not in h
    assert not nova.redis.sismember(nova.keys.held("fast"), primary.task_id)
    assert not [e for e in events(nova, "verify_started") if e.fields.get("free") == "1"]


def test_no_free_sample_when_the_backup_commits_first(nova):
    _, primary, backup = backed_up(nova)
    commit(nova, "fast", backup)
    t = task_hash(nova, primary.task_id)
    assert (t["state"], t["worker"]) == ("done", "fast")
    assert "cand" not in t and "verified_by" not in t


def test_the_timeline_draws_the_backup_as_the_check(nova):
    from nova_queue.timeline import replay

    job, primary, backup = backed_up(nova)
    commit(nova, SLOW, primary)
    nova.complete("fast", backup, rkey(backup), run_s=0.2, warm=True, meta=AGREE)
    attempts = replay([e for e in nova.events() if e.fields.get("job") == job])
    assert [(a.worker_id, a.backup, a.verify, a.outcome) for a in attempts] == [
        (SLOW, False, False, "verified"), ("fast", True, True, "agreed")]
