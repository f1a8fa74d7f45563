"""complete and complete_claim against seeded state: fencing, idempotent replays, races
with reap and cancel, the speed average, and the claim in the same call."""

import pytest
from novatests.leases import join, rkey, setup_job, task_hash
from novatests.seed import expire_lease, expire_worker

from nova_queue import TaskSpec
from nova_queue.errors import (
    JobCancelledError,
    StaleResultError,
    TaskNotFoundError,
    WorkerLostError,
)


def released_to_w2(nova, tasks):
    """w1's lease on the first of ``tasks`` runs out; w2's claim reaps it and re-leases the
    task: (w1's old lease, w2's new one)."""
    setup_job(nova, tasks)
    join(nova, "w1")
    join(nova, "w2")
    old = nova.claim("w1", "synthetic").leases[0]
    expire_lease(nova, old.task_id)
    return old, nova.claim("w2", "synthetic").leases[0]


def test_complete_commits_once_and_replays_idempotently(nova):
    job = setup_job(nova, 1)
    join(nova, "w1")
    lease = nova.claim("w1", "synthetic").leases[0]
    res = nova.complete("w1", lease, rkey(lease), run_s=2.0, warm=False, meta={"b": 1})
    assert res.job_finished and not res.replayed
    again = nova.complete("w1", lease, rkey(lease), run_s=2.0, warm=False)
    assert again.replayed and not again.job_finished
    st = nova.job(job)
    assert (st.state, st.done, st.leased) == ("done", 1, 0)
    t = st.tasks[0]
    assert (t.state, t.result, t.warm, t.cold_s, t.meta) == ("done", rkey(lease), False, 2.0, {"b": 1})
    assert nova.redis.zscore(nova.keys.finished(), job) is not None
    assert [e.type for e in nova.events()].count("job_finished") == 1


@pytest.mark.parametrize("forge", ["worker", "lease_gen", "attempt_id", "result"])
def test_forged_or_stale_completion_never_changes_a_committed_task(nova, forge):
    import dataclasses

    setup_job(nova, 1)
    join(nova, "w1")
    join(nova, "w2")
    lease = nova.claim("w1", "synthetic").leases[0]
    nova.complete("w1", lease, rkey(lease), run_s=1, warm=True)
    before = task_hash(nova, lease.task_id)
    wid = "w2" if forge == "worker" else "w1"
    forged = lease
    if forge == "lease_gen":
        forged = dataclasses.replace(lease, lease_gen=lease.lease_gen + 1)
    if forge == "attempt_id":
        forged = dataclasses.replace(lease, attempt_id="0" * 16)
    with pytest.raises(StaleResultError):  # "result": the same lease, another result key
        nova.complete(wid, forged, rkey(forged, "jpg" if forge == "result" else "png"),
                      run_s=1, warm=True)
    assert task_hash(nova, lease.task_id) == before
    assert any(e.type == "stale_rejected" for e in nova.events())


def test_complete_with_old_lease_gen_after_requeue_is_rejected(nova):
    old, new = released_to_w2(nova, tasks=1)
    assert new.task_id == old.task_id and new.lease_gen == old.lease_gen + 1
    with pytest.raises(StaleResultError, match="not leased by|another worker"):
        nova.complete("w1", old, rkey(old), run_s=1, warm=True)
    nova.complete("w2", new, rkey(new), run_s=1, warm=True)
    assert task_hash(nova, old.task_id)["result"] == rkey(new)


def test_same_worker_old_lease_gen_is_rejected(nova):
    setup_job(nova, 1)
    join(nova, "w1")
    old = nova.claim("w1", "synthetic").leases[0]
    expire_lease(nova, old.task_id)
    nova.reap()
    new = nova.claim("w1", "synthetic").leases[0]
    with pytest.raises(StaleResultError, match="lease_gen"):
        nova.complete("w1", old, rkey(old), run_s=1, warm=True)
    import dataclasses

    with pytest.raises(StaleResultError, match="attempt_id"):
        other = dataclasses.replace(new, attempt_id="f" * 16)
        nova.complete("w1", other, rkey(other), run_s=1, warm=True)


def test_unknown_task_is_refused(nova):
    from nova_queue.models import Lease

    join(nova, "w1")
    ghost = Lease("nojob:0", "nojob", 0, "synthetic", "", 1, {}, 1, "a", 1, 0, None)
    with pytest.raises(TaskNotFoundError):
        nova.complete("w1", ghost, rkey(ghost), run_s=1, warm=True)


def test_complete_after_cancel_is_rejected(nova):
    job = setup_job(nova, 3)
    join(nova, "w1")
    lease = nova.claim("w1", "synthetic").leases[0]
    nova.cancel(job)
    assert nova.renew("w1", [lease]).lost == [lease.task_id]
    with pytest.raises(JobCancelledError):
        nova.complete("w1", lease, rkey(lease), run_s=1, warm=True)
    st = nova.job(job)
    assert (st.state, st.cancelled, st.leased, st.pending) == ("cancelled", 3, 0, 0)
    assert st.finished_ms is not None
    assert nova.claim("w1", "synthetic").status == "empty"


@pytest.mark.parametrize("order", ["reap_first", "complete_first"])
def test_reap_racing_complete_at_the_deadline(nova, order):
    setup_job(nova, 1)
    join(nova, "w1")
    lease = nova.claim("w1", "synthetic").leases[0]
    expire_lease(nova, lease.task_id)
    if order == "reap_first":
        assert nova.reap()["leases_expired"] == 1
        with pytest.raises(StaleResultError):
            nova.complete("w1", lease, rkey(lease), run_s=1, warm=True)
        assert task_hash(nova, lease.task_id)["state"] == "pending"
    else:
        nova.complete("w1", lease, rkey(lease), run_s=1, warm=True)
        assert nova.reap()["leases_expired"] == 0
        assert task_hash(nova, lease.task_id)["state"] == "done"
    h = task_hash(nova, lease.task_id)
    assert h["lease_gen"] == "1"


def test_speed_ema_uses_warm_runs_only(nova):
    setup_job(nova, 4)
    join(nova, "w1")
    for run_s, warm in [(9.0, False), (2.0, True), (4.0, True)]:
        lease = nova.claim("w1", "synthetic").leases[0]
        nova.complete("w1", lease, rkey(lease), run_s=run_s, warm=warm)
    h = nova.redis.hgetall(nova.keys.worker("w1"))
    alpha = nova.settings.ema_alpha
    assert float(h["ema:synthetic"]) == pytest.approx(alpha * 4.0 + (1 - alpha) * 2.0)
    assert (h["n:synthetic"], h["cold:synthetic"], h["tasks_done"]) == ("2", "9", "3")
    assert nova.redis.zscore(nova.keys.app_fleet("synthetic"), "w1") == pytest.approx(
        float(h["ema:synthetic"]), rel=1e-5)


# ---- complete_claim-15: commit, then claim, in one call -----------------------------------
def test_complete_and_claim_commits_then_claims_in_one_call(nova):
    job = setup_job(nova, 3)
    join(nova, "w1")
    first = nova.claim("w1", "synthetic").leases[0]
    done, nxt = nova.complete_and_claim("w1", first, rkey(first), run_s=0.5, warm=True)
    assert not done.job_finished and not done.replayed
    assert nxt.status == "ok" and [lease.index for lease in nxt.leases] == [1]
    assert task_hash(nova, first.task_id)["result"] == rkey(first)
    assert task_hash(nova, nxt.leases[0].task_id)["state"] == "leased"
    st = nova.job(job, with_tasks=False)
    assert (st.done, st.leased, st.pending) == (1, 1, 1)
    assert nova.redis.hget(nova.keys.inflight(), "synthetic") == "1"
    assert nova.redis.smembers(nova.keys.held("w1")) == {nxt.leases[0].task_id}
    # the same events, in the same order, as complete followed by claim
    kinds = [(e.type, e.fields.get("task")) for e in nova.events()
             if e.type in ("claimed", "completed")]
    assert kinds == [("claimed", "0"), ("completed", "0"), ("claimed", "1")]
    # the warm run fed the worker's moving average before the claim weighed it
    assert float(nova.redis.hget(nova.keys.worker("w1"), "ema:synthetic")) == 0.5
    assert nxt.leases[0].predicted_s == 0.5


def test_complete_and_claim_finishing_the_job_reports_it_and_finds_nothing(nova):
    job = setup_job(nova, 1)
    join(nova, "w1")
    lease = nova.claim("w1", "synthetic").leases[0]
    done, nxt = nova.complete_and_claim("w1", lease, rkey(lease), run_s=0.1, warm=False)
    assert done.job_finished and nxt.status == "empty"
    assert nova.job(job, with_tasks=False).state == "done"


def test_complete_and_claim_with_a_stale_lease_claims_nothing(nova):
    old, new = released_to_w2(nova, tasks=2)
    assert new.task_id == old.task_id
    with pytest.raises(StaleResultError):
        nova.complete_and_claim("w1", old, rkey(old), run_s=1, warm=True)
    assert nova.pending_count("synthetic") == 1  # the other task is still there
    assert nova.redis.scard(nova.keys.held("w1")) == 0
    assert task_hash(nova, old.task_id)["worker"] == "w2"


def test_complete_and_claim_retried_after_a_lost_reply_is_idempotent(nova):
    job = setup_job(nova, 3)
    join(nova, "w1")
    lease = nova.claim("w1", "synthetic").leases[0]
    done, nxt = nova.complete_and_claim("w1", lease, rkey(lease), run_s=0.1, warm=True,
                                        attempt_ids=["retry-me"])
    again, nxt2 = nova.complete_and_claim("w1", lease, rkey(lease), run_s=0.1, warm=True,
                                          attempt_ids=["retry-me"])
    assert again.replayed and not done.replayed
    assert [x.task_id for x in nxt2.leases] == [x.task_id for x in nxt.leases]
    assert nxt2.leases[0].lease_gen == nxt.leases[0].lease_gen
    st = nova.job(job, with_tasks=False)
    assert (st.done, st.leased, st.pending) == (1, 1, 1)


def test_complete_and_claim_can_claim_for_another_app(nova):
    join(nova, "w1", apps=("synthetic", "other"))
    setup_job(nova, 1)
    other = nova.enqueue("other", [TaskSpec("o0")])
    lease = nova.claim("w1", "synthetic").leases[0]
    _, nxt = nova.complete_and_claim("w1", lease, rkey(lease), run_s=0.1, warm=True, app="other")
    assert nxt.status == "ok" and nxt.leases[0].app == "other"
    assert nxt.leases[0].job_id == other


def test_complete_and_claim_by_a_worker_declared_lost_commits_and_claims_nothing(nova):
    setup_job(nova, 2)
    join(nova, "w1")
    lease = nova.claim("w1", "synthetic").leases[0]
    expire_worker(nova, "w1")  # not reaped yet: the lease is still the current one
    done, nxt = nova.complete_and_claim("w1", lease, rkey(lease), run_s=0.1, warm=True)
    assert nxt is None and not done.replayed
    assert task_hash(nova, lease.task_id)["state"] == "done"
    with pytest.raises(WorkerLostError):
        nova.claim("w1", "synthetic")
    assert nova.pending_count("synthetic") == 1
