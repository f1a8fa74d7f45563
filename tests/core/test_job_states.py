"""How a job ends, against a real Redis: every task failed makes it ``failed``, some failed
leave it ``done`` with its failed count, a cancelled job stays ``cancelled``; and what a
failed job is to everything that reads a finished state: the outbox, the retention index
and sweep, purge, retry, cancel, the claim and the doctor."""

from __future__ import annotations

import pytest
from novatests.leases import commit, events, join, rkey, setup_job
from novatests.seed import finished_long_ago

from nova_queue import NovaClient, doctor
from nova_queue.client import BatchCommit
from nova_queue.errors import InvalidStateError, JobExpiredError


def fail_all(nova, job: str, wid: str = "w") -> list:
    """Claim every task of ``job`` (of max_attempts 1) and fail it; returns the leases. The
    job then is failed (asserted: each test below is about a failed job)."""
    failed = []
    while leases := nova.claim(wid, "synthetic").leases:
        for lease in leases:
            assert lease.job_id == job
            nova.fail(wid, lease, "error", f"boom {lease.index}")
            failed.append(lease)
    assert nova.job(job, with_tasks=False).state == "failed"
    return failed


def claim_each(nova, n: int, wid: str = "w") -> list:
    """``n`` leases of ``wid``, one claim each."""
    return [nova.claim(wid, "synthetic").leases[0] for _ in range(n)]


def finished_state(nova, job: str) -> tuple:
    """The job's state and counts, and whether it is in the outbox and the retention index."""
    st = nova.job(job, with_tasks=False)
    return (st.state, st.done, st.failed, st.cancelled, st.finished,
            nova.redis.zscore(nova.keys.finished(), job) is not None,
            nova.redis.zscore(nova.keys.expiring(), job) is not None)


def test_a_job_whose_every_task_failed_is_failed(nova):
    join(nova, "w")
    job = setup_job(nova, 3, max_attempts=1)
    fail_all(nova, job)
    assert finished_state(nova, job) == ("failed", 0, 3, 0, True, True, True)
    assert nova.job(job, with_tasks=False).finished_ms
    [ev] = events(nova, "job_finished")
    assert ev.fields == {"job": job, "state": "failed", "done": "0", "failed": "3",
                         "cancelled": "0"}


def test_a_job_with_some_failed_tasks_is_done_with_its_failed_count(nova):
    join(nova, "w")
    job = setup_job(nova, 3, max_attempts=1)
    a, b, c = claim_each(nova, 3)
    nova.fail("w", a, "error", "boom")
    nova.fail("w", b, "oom", "out of memory")
    commit(nova, "w", c)  # the last task to end is a success
    assert finished_state(nova, job) == ("done", 1, 2, 0, True, True, True)
    assert [e.fields["state"] for e in events(nova, "job_finished")] == ["done"]


def test_a_batch_commit_that_ends_a_job_with_failed_tasks_leaves_it_done(nova):
    join(nova, "w")
    job = setup_job(nova, 3, max_attempts=1)
    a, b, c = claim_each(nova, 3)
    nova.fail("w", a, "error", "boom")
    nova.complete_batch("w", [BatchCommit(x, rkey(x), 0.01, True) for x in (b, c)])
    assert finished_state(nova, job) == ("done", 2, 1, 0, True, True, True)


def test_a_cancelled_job_stays_cancelled_when_its_last_task_fails(nova):
    join(nova, "w")
    job = setup_job(nova, 2, max_attempts=1)
    lease = nova.claim("w", "synthetic").leases[0]
    nova.cancel(job)  # the other task is cancelled; this lease runs on
    nova.fail("w", lease, "error", "boom")
    assert finished_state(nova, job)[:5] == ("cancelled", 0, 0, 2, True)
    assert nova.redis.zscore(nova.keys.finished(), job) is None  # not post-processed
    assert nova.redis.zscore(nova.keys.expiring(), job) is not None


def test_a_failed_job_cannot_be_cancelled(nova):
    join(nova, "w")
    job = setup_job(nova, 1, max_attempts=1)
    fail_all(nova, job)
    with pytest.raises(InvalidStateError, match="job is failed"):
        nova.cancel(job)
    assert nova.job(job, with_tasks=False).state == "failed"


def test_retrying_a_task_of_a_failed_job_runs_the_job_again(nova):
    join(nova, "w")
    job = setup_job(nova, 3, max_attempts=1)
    a, *_ = fail_all(nova, job)
    first_finish = nova.redis.zscore(nova.keys.finished(), job)
    nova.retry(a.task_id)
    st = nova.job(job, with_tasks=False)
    assert (st.state, st.pending, st.failed, st.finished_ms, st.finished) == (
        "running", 1, 2, None, False)
    assert nova.redis.zscore(nova.keys.finished(), job) is None  # out of the outbox
    [again] = nova.claim("w", "synthetic").leases
    assert again.task_id == a.task_id
    commit(nova, "w", again)
    assert finished_state(nova, job) == ("done", 1, 2, 0, True, True, True)
    assert nova.redis.zscore(nova.keys.finished(), job) >= first_finish
    assert [e.fields["state"] for e in events(nova, "job_finished")] == ["failed", "done"]


def test_retrying_every_task_of_a_failed_job_that_fails_again_fails_it_again(nova):
    join(nova, "w")
    job = setup_job(nova, 2, max_attempts=1)
    for lease in fail_all(nova, job):
        nova.retry(lease.task_id)
    assert nova.job(job, with_tasks=False).state == "running"
    fail_all(nova, job)
    assert finished_state(nova, job) == ("failed", 0, 2, 0, True, True, True)


def test_a_claim_takes_nothing_of_a_failed_job(nova):
    join(nova, "w")
    job = setup_job(nova, 1, max_attempts=1)
    fail_all(nova, job)
    # a stray pending entry of the failed job (forged, or left by a bug) is not leased
    nova.redis.zadd(nova.keys.pending("synthetic"), {f"{job}:0": 1})
    assert nova.claim("w", "synthetic").leases == []
    assert nova.task(f"{job}:0").state == "failed"


def test_a_failed_job_expires_after_its_retention(redis_url, namespace):
    nova = NovaClient.from_url(redis_url, namespace=namespace)
    try:
        join(nova, "w")
        job = setup_job(nova, 2, max_attempts=1, retention_s=3600)
        fail_all(nova, job)
        finished_ms = nova.job(job, with_tasks=False).finished_ms
        assert nova.redis.zscore(nova.keys.expiring(), job) == finished_ms + 3_600_000
        assert nova.expire()["jobs"] == 0  # not due yet: kept, and still in the index
        assert nova.redis.zscore(nova.keys.expiring(), job) is not None
        finished_long_ago(nova, job)
        assert nova.expire()["jobs"] == 1
        with pytest.raises(JobExpiredError):
            nova.job(job)
        assert nova.redis.zscore(nova.keys.failed(), f"{job}:0") is None
    finally:
        nova.close()


def test_a_failed_job_is_purged(nova):
    join(nova, "w")
    job = setup_job(nova, 2, max_attempts=1)
    fail_all(nova, job)
    assert nova.purge(job) == 2
    for key in (nova.keys.finished(), nova.keys.expiring(), nova.keys.failed()):
        assert nova.redis.zscore(key, job) is None and nova.redis.zscore(key, f"{job}:0") is None
    with pytest.raises(JobExpiredError):
        nova.job(job)


def job_findings(report) -> list[tuple[str, str]]:
    """The doctor's findings about jobs (settings and scripts are another test's)."""
    return [(f.severity, f.message) for f in report.findings
            if f.check in ("counts", "indexes", "placement")]


def test_the_doctor_accepts_a_failed_job_and_restores_its_retention_entry(nova):
    join(nova, "w")
    job = setup_job(nova, 2, max_attempts=1)
    fail_all(nova, job)
    report = doctor.diagnose(nova)
    assert report.ok and job_findings(report) == [], [f.message for f in report.findings]
    nova.redis.zrem(nova.keys.expiring(), job)  # as a lost write would leave it
    assert [f.check for f in doctor.diagnose(nova).problems] == ["indexes"]
    assert doctor.run(nova, fix=True).ok
    assert nova.redis.zscore(nova.keys.expiring(), job) is not None


def test_the_doctor_warns_of_a_finished_state_its_counts_deny(nova):
    """A release before the state failed finished a job whose every task failed as done."""
    join(nova, "w")
    job = setup_job(nova, 1, max_attempts=1)
    fail_all(nova, job)
    nova.redis.hset(nova.keys.job(job), "state", "done")
    report = doctor.diagnose(nova)
    assert report.ok and job_findings(report) == [
        ("warning", f"job {job} is done with 0 of its 1 tasks done")]
    nova.redis.hset(nova.keys.job(job), mapping={"state": "failed", "done": 1, "failed": 0})
    nova.redis.hset(nova.keys.task(f"{job}:0"), "state", "done")
    nova.redis.zrem(nova.keys.failed(), f"{job}:0")
    assert job_findings(doctor.diagnose(nova)) == [
        ("warning", f"job {job} is failed with 1 of its 1 tasks done")]
