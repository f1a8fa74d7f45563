"""claim / renew / fail / reap / deregister / retry / cancel against seeded state, incl.
races. Commits (complete, complete_claim) are in test_commit.py."""

import threading

import pytest
import redis
from novatests.leases import join, rkey, setup_job, task_hash
from novatests.seed import expire_lease, expire_worker, set_speed

from nova_queue.errors import StaleResultError, WorkerLostError


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
    assert nova.job(job, with_tasks=False).state == "failed"  # its only task failed
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


def test_connection_errors_are_redis_errors(redis_url):
    from nova_queue import NovaClient

    c = NovaClient.from_url("redis://127.0.0.1:1/0")
    with pytest.raises(redis.ConnectionError):
        c.jobs()


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
