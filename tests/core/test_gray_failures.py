"""Run-time limits, fault attribution, quarantine and backup attempts, against seeded state.

The scripts decide all of it (claim, renew, complete, fail, reap, quarantine); these tests
put Redis in the state under test (a lease that started long ago, a worker whose failures
succeed elsewhere) and check what each call then does, including what the event stream and
the other worker see.
"""

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
from novatests.seed import expire_lease, expire_worker, set_speed

from nova_queue import NovaClient
from nova_queue.errors import StaleResultError, WorkerLostError

# -- run-time limits ---------------------------------------------------------------------

def test_each_lease_gets_a_run_deadline(nova, namespace, redis_url):
    setup_job(nova, 4, cost=2.0)
    join(nova, "w")
    explore = nova.claim("w", "synthetic").leases[0]  # no estimate: the floor
    assert explore.run_deadline_ms - explore.deadline_ms + nova.settings.lease_ttl_ms == 120_000
    set_speed(nova, "w", "synthetic", 20.0)  # predicted 40 s per task: 10 x that
    a, b = nova.claim("w", "synthetic", k=2).leases
    now = int(task_hash(nova, a.task_id)["claimed_ms"])
    assert (a.run_deadline_ms - now, b.run_deadline_ms - now) == (400_000, 800_000)
    assert int(task_hash(nova, a.task_id)["run_deadline_ms"]) == a.run_deadline_ms
    job = setup_job(nova, 2, timeout_s=1.5)
    assert nova.job(job, with_tasks=False).timeout_s == 1.5
    nova.redis.delete(nova.keys.pending("synthetic"))
    nova.redis.zadd(nova.keys.pending("synthetic"), {f"{job}:0": 1, f"{job}:1": 2})
    c, d = nova.claim("w", "synthetic", k=2).leases
    now = int(task_hash(nova, c.task_id)["claimed_ms"])
    assert (c.run_deadline_ms - now, d.run_deadline_ms - now) == (1500, 3000)
    assert c.deadline_ms - now == 1500  # the lease itself never outlives the limit


def test_renew_stops_at_the_run_deadline_and_the_late_result_is_stale(nova):
    job = setup_job(nova, 1, timeout_s=30)
    join(nova, "hung")
    join(nova, "other")
    lease = nova.claim("hung", "synthetic").leases[0]
    assert nova.renew("hung", [lease]).lost == []
    backdate(nova, lease.task_id, 31_000, "run_deadline_ms")
    backdate(nova, lease.task_id, 31_000, "claimed_ms")
    res = nova.renew("hung", [lease])
    assert res.lost == [lease.task_id] and res.reasons == {lease.task_id: "timeout"}
    h = task_hash(nova, lease.task_id)
    assert (h["state"], h["error_kind"], h["attempt_count"], h["failed_on"]) == (
        "pending", "timeout", "1", "hung")
    assert "ran past its run-time limit of 30 s" in h["error"]
    assert worker_hash(nova, "hung")["fail_streak"] == "1"
    with pytest.raises(StaleResultError):
        commit(nova, "hung", lease)
    # the task goes to the other worker first (it timed out on "hung")
    assert nova.claim("hung", "synthetic").status == "wait"
    again = nova.claim("other", "synthetic").leases[0]
    assert again.task_id == lease.task_id and again.lease_gen == 2
    commit(nova, "other", again)
    assert nova.job(job, with_tasks=False).state == "done"


def test_a_lease_past_its_run_deadline_is_reaped_as_a_timeout(nova):
    setup_job(nova, 1, timeout_s=5)
    join(nova, "w")
    lease = nova.claim("w", "synthetic").leases[0]
    expire_lease(nova, lease.task_id)
    nova.redis.hset(nova.keys.task(lease.task_id), "run_deadline_ms", 1)
    assert nova.reap()["leases_expired"] == 1
    h = task_hash(nova, lease.task_id)
    assert (h["state"], h["error_kind"]) == ("pending", "timeout")
    assert nova.renew("w", [lease]).reasons == {lease.task_id: "timeout"}


# -- fault attribution -------------------------------------------------------------------

def test_a_failed_task_goes_to_another_worker_while_one_lives(nova):
    setup_job(nova, 1, max_attempts=3)
    join(nova, "a")
    join(nova, "b")
    lease = nova.claim("a", "synthetic").leases[0]
    nova.fail("a", lease, "error", "boom")
    assert task_hash(nova, lease.task_id)["failed_on"] == "a"
    assert nova.claim("a", "synthetic").status == "wait"  # left to b
    expire_worker(nova, "b")
    nova.reap()
    again = nova.claim("a", "synthetic").leases[0]  # nobody else is live: it may run here
    assert again.task_id == lease.task_id and again.attempt == 2


def test_a_poison_task_still_fails_after_max_attempts_and_benches_nobody(nova):
    job = setup_job(nova, 1, max_attempts=3)
    join(nova, "a")
    join(nova, "b")
    order = []
    for _ in range(3):
        for wid in ("a", "b"):
            res = nova.claim(wid, "synthetic")
            if res.leases:
                order.append(wid)
                nova.fail(wid, res.leases[0], "error", "poison")
                break
    assert order[:2] == ["a", "b"] and len(order) == 3
    st = nova.job(job)
    assert (st.state, st.failed, st.tasks[0].attempt_count) == ("failed", 1, 3)
    assert not any(w.quarantined for w in nova.workers())


# -- quarantine --------------------------------------------------------------------------

def fail_three_that_succeed_elsewhere(nova):
    job = setup_job(nova, 3, max_attempts=3)
    join(nova, "broken")
    join(nova, "good")
    set_speed(nova, "broken", "synthetic", 0.1)
    set_speed(nova, "good", "synthetic", 0.1)
    failed = []
    for _ in range(3):
        lease = nova.claim("broken", "synthetic").leases[0]
        nova.fail("broken", lease, "error", "CUDA error: device-side assert")
        failed.append(lease.task_id)
    assert worker_hash(nova, "broken")["fail_streak"] == "3"
    for _ in range(3):
        commit(nova, "good", nova.claim("good", "synthetic").leases[0])
    return job, failed


def test_a_worker_whose_failures_succeed_elsewhere_is_quarantined(nova):
    job, failed = fail_three_that_succeed_elsewhere(nova)
    info = {w.worker_id: w for w in nova.workers()}["broken"]
    assert info.quarantined and "3 failed tasks succeeded on other workers" in info.quarantine_reason
    assert "device-side assert" in info.quarantine_reason
    assert info.to_json()["quarantined"] is True
    assert nova.redis.zscore(nova.keys.app_fleet("synthetic"), "broken") is None
    assert nova.eligible_workers("synthetic") == ["good"]
    # the attempts it used were given back: each task ran once for real
    assert [nova.task(t).attempt_count for t in failed] == [1, 1, 1]
    [ev] = events(nova, "worker_quarantined")
    assert ev.fields["worker"] == "broken" and ev.fields["refunded"] == "3"
    setup_job(nova, 2)
    res = nova.claim("broken", "synthetic")
    assert res.status == "quarantined" and res.leases == [] and "succeeded" in res.reason
    assert 0 < res.retry_after_s <= 2
    assert nova.renew("broken", []).worker_lost is False  # still registered and beating
    assert nova.job(job, with_tasks=False).state == "done"


def test_after_the_cool_down_one_probe_task_lets_it_back(nova):
    fail_three_that_succeed_elsewhere(nova)
    setup_job(nova, 4)
    nova.redis.hset(nova.keys.worker("broken"), "quarantine_until_ms", 1)
    probe = nova.claim("broken", "synthetic", k=4)
    assert [lease.cost for lease in probe.leases] == [1.0]  # a probe is one task
    assert nova.claim("broken", "synthetic").status == "quarantined"  # while it runs
    commit(nova, "broken", probe.leases[0])
    w = worker_hash(nova, "broken")
    assert "quarantined" not in w and w["fail_streak"] == "0"
    assert nova.redis.zscore(nova.keys.app_fleet("synthetic"), "broken") is not None
    assert [e.fields["by"] for e in events(nova, "worker_released")] == ["probe"]
    assert nova.claim("broken", "synthetic", k=2).status == "ok"


def test_a_failed_probe_doubles_the_cool_down(nova):
    fail_three_that_succeed_elsewhere(nova)
    setup_job(nova, 2)
    cooldown = int(worker_hash(nova, "broken")["cooldown_ms"])
    assert cooldown == nova.settings.quarantine_cooldown_s * 1000
    nova.redis.hset(nova.keys.worker("broken"), "quarantine_until_ms", 1)
    probe = nova.claim("broken", "synthetic").leases[0]
    nova.fail("broken", probe, "error", "still broken")
    w = worker_hash(nova, "broken")
    assert w["quarantined"] == "1" and int(w["cooldown_ms"]) == 2 * cooldown
    assert w["quarantine_reason"].startswith("probe task failed: still broken")
    assert nova.task(probe.task_id).attempt_count == 0  # a quarantined worker's attempt is not used
    # a probe whose lease ends some other way (it expired) counts as failed at the next claim
    nova.redis.hset(nova.keys.worker("broken"), "quarantine_until_ms", 1)
    probe = nova.claim("broken", "synthetic").leases[0]
    expire_lease(nova, probe.task_id)
    nova.reap()
    assert nova.claim("broken", "synthetic").status == "quarantined"
    assert int(worker_hash(nova, "broken")["cooldown_ms"]) == 4 * cooldown


def test_fast_failures_quarantine_only_while_others_succeed(nova):
    nova = NovaClient(nova.redis, settings=nova.settings.__class__(
        **{**nova.settings.__dict__, "quarantine_fast_fails": 3}))
    setup_job(nova, 8, max_attempts=3)
    join(nova, "blackhole")
    join(nova, "alone")
    set_speed(nova, "blackhole", "synthetic", 0.1)
    for _ in range(3):  # nobody else succeeds: the tasks may be at fault
        nova.fail("blackhole", nova.claim("blackhole", "synthetic").leases[0], "error", "x")
    assert "quarantined" not in worker_hash(nova, "blackhole")
    nova.redis.hset(nova.keys.worker("blackhole"), mapping={"fail_streak": 0, "fast_streak": 0,
                                                            "streak_tids": "", "streak_since_ms": ""})
    commit(nova, "alone", nova.claim("alone", "synthetic").leases[0])
    for _ in range(3):
        nova.fail("blackhole", nova.claim("blackhole", "synthetic").leases[0], "error", "x")
    w = worker_hash(nova, "blackhole")
    assert w["quarantined"] == "1" and "3 tasks failed in a row within 2000 ms" in w[
        "quarantine_reason"]


def test_a_quarantine_gives_back_an_attempt_that_failed_a_task(nova):
    """max_attempts 1: the broken worker's one attempt failed the task and finished its job;
    the quarantine puts the task back and the job runs again."""
    job = setup_job(nova, 1, max_attempts=1)
    join(nova, "broken")
    join(nova, "good")
    lease = nova.claim("broken", "synthetic").leases[0]
    nova.fail("broken", lease, "error", "boom")
    assert nova.job(job, with_tasks=False).state == "failed"  # its only task failed
    assert nova.set_quarantine("broken", True, reason="bad driver") == "quarantined"
    st = nova.job(job)
    assert (st.state, st.pending, st.failed, st.tasks[0].state) == ("running", 1, 0, "pending")
    assert nova.redis.zscore(nova.keys.failed(), lease.task_id) is None
    commit(nova, "good", nova.claim("good", "synthetic").leases[0])
    st = nova.job(job, with_tasks=False)
    assert (st.state, st.done, st.failed) == ("done", 1, 0)
    assert [e.fields["state"] for e in events(nova, "job_finished")] == ["failed", "done"]


def test_an_admin_quarantines_and_releases(nova):
    join(nova, "w")
    assert nova.set_quarantine("w", True, reason="maintenance") == "quarantined"
    assert nova.set_quarantine("w", True) == "unchanged"
    assert {w.worker_id: w for w in nova.workers()}["w"].quarantine_reason == (
        "by an admin: maintenance")
    assert nova.set_quarantine("w", False) == "released"
    assert nova.eligible_workers("synthetic") == ["w"]
    with pytest.raises(WorkerLostError):
        nova.set_quarantine("nobody", True)


def test_a_quarantined_worker_that_rejoins_stays_quarantined(nova):
    join(nova, "w")
    nova.set_quarantine("w", True)
    expire_worker(nova, "w")
    nova.reap()
    join(nova, "w")
    assert worker_hash(nova, "w")["quarantined"] == "1"
    assert nova.eligible_workers("synthetic") == []
