"""Backup attempts at the tail, against seeded state: an idle worker backs up a running task
it would finish clearly sooner; both run, the first commit wins, and either attempt may end
alone while the other runs on."""

from __future__ import annotations

import pytest
from novatests.leases import (
    backdate,
    commit,
    events,
    join,
    setup_job,
    task_hash,
    worker_hash,
)
from novatests.seed import expire_worker, set_speed

from nova_queue.errors import StaleResultError


def running_slowly(nova, elapsed_ms=5_000, predicted_s=0.5):
    """A task that "slow" has run for ``elapsed_ms`` against a prediction of ``predicted_s``,
    nothing else pending, and an idle "fast" worker."""
    job = setup_job(nova, 1, cost=1.0)
    join(nova, "slow")
    set_speed(nova, "slow", "synthetic", predicted_s)
    primary = nova.claim("slow", "synthetic").leases[0]
    join(nova, "fast")  # joins later (else the policy had left the task to it)
    set_speed(nova, "fast", "synthetic", 0.2)
    backdate(nova, primary.task_id, elapsed_ms)
    return job, primary


def test_an_idle_worker_backs_up_an_overdue_attempt(nova):
    _, primary = running_slowly(nova)
    res = nova.claim("fast", "synthetic")
    [backup] = res.leases
    assert backup.backup and backup.task_id == primary.task_id
    assert backup.lease_gen == primary.lease_gen + 1 and backup.attempt == primary.attempt
    h = task_hash(nova, primary.task_id)
    assert (h["state"], h["worker"], h["b_worker"]) == ("leased", "slow", "fast")
    assert nova.redis.sismember(nova.keys.held("fast"), primary.task_id)
    assert nova.task(primary.task_id).backup["worker_id"] == "fast"
    [ev] = events(nova, "backup_started")
    assert (ev.fields["worker"], ev.fields["of"]) == ("fast", "slow")
    assert nova.renew("slow", [primary]).lost == [] and nova.renew("fast", [backup]).lost == []
    join(nova, "third")
    set_speed(nova, "third", "synthetic", 0.2)
    assert nova.claim("third", "synthetic").status == "wait"  # at most one backup per task


def test_the_first_commit_wins_and_the_other_attempt_is_stale(nova):
    job, primary = running_slowly(nova)
    backup = nova.claim("fast", "synthetic").leases[0]
    commit(nova, "fast", backup, run_s=0.2)
    h = task_hash(nova, primary.task_id)
    assert (h["state"], h["worker"], h["lease_gen"]) == ("done", "fast", str(backup.lease_gen))
    assert not any(f.startswith("b_") for f in h)
    assert not nova.redis.sismember(nova.keys.held("slow"), primary.task_id)
    assert nova.renew("slow", [primary]).reasons == {primary.task_id: "superseded"}
    with pytest.raises(StaleResultError):
        commit(nova, "slow", primary)
    [won] = events(nova, "backup_won")
    assert (won.fields["worker"], won.fields["loser"]) == ("fast", "slow")
    assert float(won.fields["loser_run_s"]) >= 5.0
    # the loser ran 5 s without finishing: its estimate rises to at least that
    assert float(worker_hash(nova, "slow")["ema:synthetic"]) >= 5.0
    st = nova.job(job, with_tasks=False)
    assert (st.state, st.done, st.leased) == ("done", 1, 0)
    assert int(nova.redis.hget(nova.keys.inflight(), "synthetic")) == 0


def test_the_primary_can_win_too(nova):
    _, primary = running_slowly(nova)
    backup = nova.claim("fast", "synthetic").leases[0]
    commit(nova, "slow", primary, run_s=5.0)
    assert [e.fields["loser"] for e in events(nova, "backup_lost")] == ["fast"]
    assert nova.renew("fast", [backup]).reasons == {backup.task_id: "superseded"}
    with pytest.raises(StaleResultError):
        commit(nova, "fast", backup)
    assert task_hash(nova, primary.task_id)["worker"] == "slow"


def test_no_backup_when_predictions_hold_or_the_gain_is_small(nova):
    _, primary = running_slowly(nova, elapsed_ms=100, predicted_s=0.5)
    assert nova.claim("fast", "synthetic").status == "wait"  # 0.4 s left, 0.2 s: no clear gain
    backdate(nova, primary.task_id, 1_000)  # overdue, but saving 1.1 - 0.2 s < 1 s
    assert nova.claim("fast", "synthetic").status == "wait"
    backdate(nova, primary.task_id, 1_000)
    assert nova.claim("fast", "synthetic").leases[0].backup


def test_no_backup_while_the_worker_has_work_of_its_own(nova):
    running_slowly(nova)
    setup_job(nova, 1)
    lease = nova.claim("fast", "synthetic").leases[0]
    assert not lease.backup


def test_one_attempt_ends_and_the_other_runs_on(nova):
    job, primary = running_slowly(nova)
    backup = nova.claim("fast", "synthetic").leases[0]
    assert nova.fail("slow", primary, "error", "segfault").state == "leased"
    h = task_hash(nova, primary.task_id)
    assert (h["state"], h["worker"], h["lease_gen"]) == ("leased", "fast", str(backup.lease_gen))
    assert not nova.redis.sismember(nova.keys.held("slow"), primary.task_id)
    [ended] = events(nova, "attempt_ended")
    assert (ended.fields["worker"], ended.fields["kind"]) == ("slow", "error")
    assert nova.renew("fast", [backup]).lost == []
    commit(nova, "fast", backup)
    assert nova.job(job, with_tasks=False).state == "done"



@pytest.mark.parametrize("by", ["renew", "reap"])
def test_a_primary_past_its_run_deadline_ends_alone_and_the_backup_commits(nova, by):
    """The primary's run deadline passes while its backup runs (a hung worker's heartbeat
    renews, or a claim reaps): only the primary ends, as a timeout (attempt_ended, kind
    timeout; the task is not requeued), and the backup commits as the task's only attempt
    (completed; no backup_won). Chaos scenario 15 accepts this outcome."""
    job, primary = running_slowly(nova)
    backup = nova.claim("fast", "synthetic").leases[0]
    nova.redis.hset(nova.keys.task(primary.task_id), "run_deadline_ms", 1)
    if by == "renew":
        assert nova.renew("slow", [primary]).reasons == {primary.task_id: "timeout"}
    else:
        nova.redis.hset(nova.keys.task(primary.task_id), "deadline_ms", 1)
        nova.redis.zadd(nova.keys.leases(), {primary.task_id: 1})
        assert nova.reap()["leases_expired"] == 1
        assert nova.renew("slow", [primary]).lost == [primary.task_id]
    h = task_hash(nova, primary.task_id)
    assert (h["state"], h["worker"], h["lease_gen"]) == ("leased", "fast", str(backup.lease_gen))
    assert "slow" in h["failed_on"].split(",")
    [ended] = events(nova, "attempt_ended")
    assert (ended.fields["worker"], ended.fields["kind"]) == ("slow", "timeout")
    assert nova.renew("fast", [backup]).lost == []
    commit(nova, "fast", backup)
    assert task_hash(nova, primary.task_id)["worker"] == "fast"
    assert not events(nova, "requeued", "backup_won", "backup_lost")
    assert nova.job(job, with_tasks=False).state == "done"

def test_a_lost_backup_worker_leaves_the_primary_running(nova):
    _, primary = running_slowly(nova)
    nova.claim("fast", "synthetic")
    expire_worker(nova, "fast")
    nova.reap()
    h = task_hash(nova, primary.task_id)
    assert (h["state"], h["worker"], "b_worker" in h) == ("leased", "slow", False)
    assert nova.renew("slow", [primary]).lost == []
    deadline = int(task_hash(nova, primary.task_id)["deadline_ms"])
    assert nova.redis.zscore(nova.keys.leases(), primary.task_id) == deadline


def test_an_expired_attempt_ends_alone(nova):
    _, primary = running_slowly(nova)
    backup = nova.claim("fast", "synthetic").leases[0]
    nova.redis.hset(nova.keys.task(primary.task_id), "deadline_ms", 1)
    nova.redis.zadd(nova.keys.leases(), {primary.task_id: 1})
    nova.reap()
    h = task_hash(nova, primary.task_id)
    assert (h["state"], h["worker"]) == ("leased", "fast")
    assert nova.redis.zscore(nova.keys.leases(), primary.task_id) == backup.deadline_ms


def test_a_retried_claim_gets_its_backup_lease_back(nova):
    running_slowly(nova)
    first = nova.claim("fast", "synthetic", attempt_ids=["retry1"]).leases
    again = nova.claim("fast", "synthetic", attempt_ids=["retry1"]).leases
    assert again == first and again[0].backup


def test_a_late_joiner_backs_up_a_slow_workers_long_task(nova):
    """The slow worker's prediction is right, but a worker that joined later finishes the task
    far sooner: that is a backup too (the benchmark's late-joiner case)."""
    running_slowly(nova, elapsed_ms=1_000, predicted_s=80.0)
    assert nova.claim("fast", "synthetic").leases[0].backup
