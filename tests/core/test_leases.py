"""claim / renew / complete / fail / reap / cancel against seeded state, incl. races."""

import threading

import pytest
import redis
from novatests.seed import expire_lease, expire_worker, set_speed

from nova_queue import TaskSpec
from nova_queue.errors import (
    JobCancelledError,
    StaleResultError,
    TaskNotFoundError,
    WorkerLostError,
)
from nova_queue.keys import result_key


def join(nova, wid, apps=("synthetic",), **fields):
    nova.register_worker(wid, {"name": wid, "backend": "cpu", **fields}, apps)


def setup_job(nova, n=3, **kw):
    return nova.enqueue("synthetic", [TaskSpec(f"p{i}") for i in range(n)], **kw)


def rkey(lease, ext="png"):
    """The result key ``complete`` accepts for ``lease``."""
    return result_key(lease.job_id, lease.index, lease.lease_gen, lease.attempt_id, ext)


def task_hash(nova, tid):
    return nova.redis.hgetall(nova.keys.task(tid))


def test_claim_sets_fenced_lease(nova):
    job = setup_job(nova)
    join(nova, "w1")
    res = nova.claim("w1", "synthetic")
    assert res.status == "ok" and len(res.leases) == 1
    lease = res.leases[0]
    h = task_hash(nova, lease.task_id)
    assert (h["state"], h["worker"], h["lease_gen"], h["attempt_count"]) == ("leased", "w1", "1", "1")
    assert h["attempt_id"] == lease.attempt_id and len(lease.attempt_id) == 16
    assert int(h["deadline_ms"]) == lease.deadline_ms
    assert lease.deadline_ms - res.now_ms == nova.settings.lease_ttl_ms
    assert nova.redis.zscore(nova.keys.leases(), lease.task_id) == lease.deadline_ms
    assert nova.redis.sismember(nova.keys.held("w1"), lease.task_id)
    st = nova.job(job, with_tasks=False)
    assert (st.state, st.pending, st.leased) == ("running", 2, 1)


def test_claim_k_tasks_for_a_batch(nova):
    setup_job(nova, 10)
    join(nova, "gpu")
    res = nova.claim("gpu", "synthetic", k=1)  # explore first (no estimate yet)
    assert len(res.leases) == 1
    nova.redis.hset(nova.keys.worker("gpu"), mapping={"ema:synthetic": 0.1, "n:synthetic": 3})
    nova.redis.zadd(nova.keys.app_fleet("synthetic"), {"gpu": 0.1})
    res = nova.claim("gpu", "synthetic", k=4)
    assert [lease.index for lease in res.leases] == [1, 2, 3, 4]
    assert len({lease.attempt_id for lease in res.leases}) == 4


def test_unregistered_worker_cannot_claim(nova):
    setup_job(nova)
    with pytest.raises(WorkerLostError):
        nova.claim("ghost", "synthetic")


def test_claim_empty_vs_wait(nova):
    join(nova, "w1")
    assert nova.claim("w1", "synthetic").status == "empty"
    setup_job(nova, 1)
    assert nova.claim("w1", "synthetic").status == "ok"
    res = nova.claim("w1", "synthetic")  # nothing pending, one in flight: it may come back
    assert res.status == "wait" and res.retry_after_s > 0


def test_double_claim_race_never_leases_a_task_twice(nova, redis_url):
    setup_job(nova, 40)
    from nova_queue import NovaClient

    got: dict[str, list[str]] = {}

    def worker(wid):
        c = NovaClient.from_url(redis_url, namespace=nova.settings.namespace)
        join(c, wid)
        mine = got.setdefault(wid, [])
        while True:
            res = c.claim(wid, "synthetic")
            if res.status != "ok":
                break
            mine += [lease.task_id for lease in res.leases]
        c.close()

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    every = [tid for tids in got.values() for tid in tids]
    assert len(every) == 40 and len(set(every)) == 40


def test_retried_claim_after_lost_reply_returns_the_same_leases(nova):
    setup_job(nova, 3)
    join(nova, "w1")
    first = nova.claim("w1", "synthetic", attempt_ids=["aaaa"])
    again = nova.claim("w1", "synthetic", attempt_ids=["aaaa"])
    assert [lease.task_id for lease in again.leases] == [lease.task_id for lease in first.leases]
    assert again.leases[0].lease_gen == first.leases[0].lease_gen
    assert nova.job(first.leases[0].job_id, with_tasks=False).leased == 1


def test_renew_extends_and_reports_lost(nova):
    setup_job(nova, 2)
    join(nova, "w1")
    a = nova.claim("w1", "synthetic").leases[0]
    b = nova.claim("w1", "synthetic").leases[0]
    nova.redis.hset(nova.keys.task(b.task_id), "lease_gen", 99)  # re-leased elsewhere
    res = nova.renew("w1", [a, b])
    assert res.lost == [b.task_id] and not res.worker_lost
    assert nova.redis.zscore(nova.keys.leases(), a.task_id) == res.now_ms + nova.settings.lease_ttl_ms
    assert nova.redis.zscore(nova.keys.alive(), "w1") == res.now_ms + nova.settings.lease_ttl_ms


def test_renew_after_expiry_reports_the_lease_lost(nova):
    setup_job(nova, 1)
    join(nova, "w1")
    lease = nova.claim("w1", "synthetic").leases[0]
    expire_lease(nova, lease.task_id)
    res = nova.renew("w1", [lease])
    assert res.lost == [lease.task_id]
    h = task_hash(nova, lease.task_id)
    assert h["state"] == "pending" and h["error_kind"] == "expired"
    with pytest.raises(StaleResultError):
        nova.complete("w1", lease, rkey(lease), run_s=1, warm=True)


def test_renew_of_a_lost_worker_loses_everything(nova):
    setup_job(nova, 1)
    join(nova, "w1")
    lease = nova.claim("w1", "synthetic").leases[0]
    expire_worker(nova, "w1")
    join(nova, "w2")
    nova.claim("w2", "synthetic")  # any claim reaps: w1 is lost, its task requeued and re-leased
    res = nova.renew("w1", [lease])
    assert res.worker_lost and res.lost == [lease.task_id]
    assert nova.redis.hget(nova.keys.worker("w1"), "state") == "lost"
    kinds = [e.type for e in nova.events()]
    assert "worker_lost" in kinds and "requeued" in kinds


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
    setup_job(nova, 1)
    join(nova, "w1")
    join(nova, "w2")
    old = nova.claim("w1", "synthetic").leases[0]
    expire_lease(nova, old.task_id)
    new = nova.claim("w2", "synthetic").leases[0]  # reaps, then re-leases
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


def test_fail_kinds(nova):
    job = setup_job(nova, 3, max_attempts=2)
    join(nova, "w1")
    join(nova, "w2")
    # shutdown gives the attempt back
    lease = nova.claim("w1", "synthetic").leases[0]
    assert nova.fail("w1", lease, "shutdown").requeued
    assert task_hash(nova, lease.task_id)["attempt_count"] == "0"
    # oom: requeued and remembered, so w1 skips it while w2 can take it
    lease = nova.claim("w1", "synthetic").leases[0]
    assert nova.fail("w1", lease, "oom", "CUDA out of memory").requeued
    assert task_hash(nova, lease.task_id)["oom"] == "w1"
    skipped = nova.claim("w1", "synthetic").leases[0]
    assert skipped.task_id != lease.task_id
    taken = nova.claim("w2", "synthetic").leases[0]
    assert taken.task_id == lease.task_id
    # error: requeue until attempts are used up, then failed; the job still finishes
    assert nova.fail("w2", taken, "error", "boom").state == "failed"
    assert nova.redis.zscore(nova.keys.failed(), taken.task_id) is not None
    nova.complete("w1", skipped, rkey(skipped), run_s=1, warm=True)
    last = nova.claim("w2", "synthetic").leases[0]
    nova.complete("w2", last, rkey(last), run_s=1, warm=True)
    st = nova.job(job)
    assert (st.state, st.done, st.failed) == ("done", 2, 1)
    failed = nova.failed_tasks()
    assert [t.task_id for t in failed] == [taken.task_id] and failed[0].error == "boom"
    w2 = nova.redis.hgetall(nova.keys.worker("w2"))
    assert w2["failures"] == "1"


def test_oom_task_goes_back_to_the_only_worker_when_no_other_can_try(nova):
    setup_job(nova, 1)
    join(nova, "solo")
    lease = nova.claim("solo", "synthetic").leases[0]
    nova.fail("solo", lease, "oom")
    again = nova.claim("solo", "synthetic")
    assert again.status == "ok" and again.leases[0].task_id == lease.task_id


def test_stale_fail_is_rejected(nova):
    import dataclasses

    setup_job(nova, 1)
    join(nova, "w1")
    lease = nova.claim("w1", "synthetic").leases[0]
    with pytest.raises(StaleResultError):
        nova.fail("w1", dataclasses.replace(lease, lease_gen=7), "error", "x")
    assert task_hash(nova, lease.task_id)["state"] == "leased"


def test_retry_failed_task(nova):
    job = setup_job(nova, 1, max_attempts=1)
    join(nova, "w1")
    lease = nova.claim("w1", "synthetic").leases[0]
    nova.fail("w1", lease, "error", "bad")
    assert nova.job(job, with_tasks=False).state == "done"
    nova.retry(lease.task_id)
    st = nova.job(job)
    assert (st.state, st.failed, st.pending) == ("running", 0, 1)
    assert st.tasks[0].attempt_count == 0
    again = nova.claim("w1", "synthetic").leases[0]
    assert again.lease_gen == 2
    nova.complete("w1", again, rkey(again), run_s=1, warm=True)
    assert nova.job(job, with_tasks=False).state == "done"


def test_lost_worker_is_reaped_and_its_leases_requeued(nova):
    job = setup_job(nova, 2)
    join(nova, "w1")
    lease = nova.claim("w1", "synthetic").leases[0]
    expire_worker(nova, "w1")
    res = nova.reap()
    assert res["workers_lost"] == 1
    h = task_hash(nova, lease.task_id)
    assert (h["state"], h["error_kind"], h["last_worker"]) == ("pending", "lost", "w1")
    w = {x.worker_id: x for x in nova.workers()}["w1"]
    assert (w.alive, w.state) == (False, "lost")
    assert nova.job(job, with_tasks=False).pending == 2
    assert not nova.redis.sismember(nova.keys.app_workers("synthetic"), "w1")


def test_deregister_releases_without_burning_attempts(nova):
    setup_job(nova, 1)
    join(nova, "w1")
    lease = nova.claim("w1", "synthetic").leases[0]
    assert nova.deregister_worker("w1") == 1
    h = task_hash(nova, lease.task_id)
    assert (h["state"], h["attempt_count"]) == ("pending", "0")
    assert nova.workers()[0].state == "stopped"


def test_grace_window_after_redis_was_unreachable(nova):
    setup_job(nova, 1)
    join(nova, "w1")
    lease = nova.claim("w1", "synthetic").leases[0]
    # seed: nothing ran for a minute (Redis was down) and every deadline has passed
    now = nova.server_time_ms()
    nova.redis.hset(nova.keys.meta(), "last_tick_ms", now - 60_000)
    expire_lease(nova, lease.task_id)
    expire_worker(nova, "w1")
    join(nova, "w2")
    assert nova.claim("w2", "synthetic").status in ("wait", "empty")
    assert task_hash(nova, lease.task_id)["state"] == "leased"  # not mass-expired
    nova.redis.zadd(nova.keys.alive(), {"w1": now + 60_000})  # w1 is back...
    assert nova.renew("w1", [lease]).lost == []  # ...and keeps its lease
    grace = int(nova.redis.hget(nova.keys.meta(), "grace_until_ms"))
    assert grace >= now + nova.settings.lease_ttl_ms - 1000
    assert any(e.type == "grace" for e in nova.events())


def test_script_flush_then_call_just_works(nova):
    setup_job(nova, 2)
    join(nova, "w1")
    nova.redis.script_flush()
    res = nova.claim("w1", "synthetic")
    assert res.status == "ok"
    nova.redis.script_flush()
    nova.complete("w1", res.leases[0], rkey(res.leases[0]), run_s=1, warm=True)
    assert task_hash(nova, res.leases[0].task_id)["state"] == "done"


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


def test_connection_errors_are_redis_errors(redis_url):
    from nova_queue import NovaClient

    c = NovaClient.from_url("redis://127.0.0.1:1/0")
    with pytest.raises(redis.ConnectionError):
        c.jobs()


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
    setup_job(nova, 2)
    join(nova, "w1")
    join(nova, "w2")
    old = nova.claim("w1", "synthetic").leases[0]
    expire_lease(nova, old.task_id)
    new = nova.claim("w2", "synthetic").leases[0]
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


def test_claim_of_k_tasks_across_jobs_keeps_every_jobs_counts(nova):
    a = setup_job(nova, 2)
    b = setup_job(nova, 3)
    join(nova, "gpu")
    set_speed(nova, "gpu", "synthetic", 0.1)
    res = nova.claim("gpu", "synthetic", k=4)
    assert [(x.job_id, x.index) for x in res.leases] == [(a, 0), (a, 1), (b, 0), (b, 1)]
    sa, sb = nova.job(a, with_tasks=False), nova.job(b, with_tasks=False)
    assert (sa.state, sa.pending, sa.leased) == ("running", 0, 2)
    assert (sb.state, sb.pending, sb.leased) == ("running", 1, 2)


def test_requeued_and_retried_tasks_return_to_their_old_place(nova):
    a = setup_job(nova, 3, max_attempts=1)
    pending = nova.keys.pending("synthetic")
    scores = dict(nova.redis.zrange(pending, 0, -1, withscores=True))
    join(nova, "w1")
    join(nova, "w2")
    lease = nova.claim("w1", "synthetic").leases[0]
    nova.fail("w1", lease, "shutdown")  # no attempt used: back to pending
    assert nova.redis.zscore(pending, lease.task_id) == scores[lease.task_id]
    lease = nova.claim("w1", "synthetic").leases[0]
    nova.fail("w1", lease, "error")  # its only attempt: failed
    assert nova.redis.zscore(pending, lease.task_id) is None
    nova.retry(lease.task_id)
    assert nova.redis.zscore(pending, lease.task_id) == scores[lease.task_id]
    assert nova.redis.zrange(pending, 0, -1) == [f"{a}:{i}" for i in range(3)]


def test_eligible_workers_counts_only_live_workers_of_the_app(nova):
    assert nova.eligible_workers("txt2img") == [] and nova.live_apps() == {}
    join(nova, "a", apps=("synthetic",))
    join(nova, "b", apps=("synthetic", "txt2img"))
    join(nova, "c", apps=("txt2img",))
    assert nova.eligible_workers("txt2img") == ["b", "c"]
    assert nova.live_apps() == {"synthetic": 2, "txt2img": 2}
    expire_worker(nova, "c")  # heartbeat ran out, not yet reaped: not eligible
    assert nova.eligible_workers("txt2img") == ["b"]
    nova.deregister_worker("b")
    assert nova.eligible_workers("txt2img") == []
    assert nova.live_apps() == {"synthetic": 1}
