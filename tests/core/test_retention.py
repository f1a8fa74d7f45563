"""Retention against a real Redis: finished jobs leave Redis after their retention with their
tasks and index entries, departed workers are forgotten, purge deletes a job now, readers say
"expired", and a steady stream of jobs keeps the namespace's size bounded."""

from __future__ import annotations

import pytest
from novatests.leases import join, rkey, setup_job
from novatests.seed import departed_long_ago, expire_worker, finished_long_ago

from nova_queue import NovaClient, TaskSpec
from nova_queue.errors import (
    ConfigError,
    InputError,
    InvalidStateError,
    JobExpiredError,
    JobNotFoundError,
    TaskNotFoundError,
)
from nova_queue.limits import DEFAULT_RETENTION_S, MAX_RETENTION_S
from nova_queue.settings import Settings


@pytest.fixture
def short(redis_url, namespace):
    """A client whose jobs and departed workers expire as soon as they are done."""
    client = NovaClient.from_url(redis_url, namespace=namespace, job_retention_s=0)
    yield client
    client.close()


def run_job(nova, job, wid="w"):
    """Claim and commit every task of ``job``."""
    while True:
        res = nova.claim(wid, "synthetic", k=8)
        if not res.leases:
            return
        for lease in res.leases:
            nova.complete(wid, lease, rkey(lease), run_s=0.01, warm=True)


def ns_keys(nova) -> set[str]:
    return set(nova.redis.scan_iter(match=nova.prefix + "*", count=1000))


def test_a_finished_job_enters_the_retention_index_at_its_expiry(nova):
    join(nova, "w")
    job = setup_job(nova, 2, retention_s=3600)
    default = setup_job(nova, 1)
    assert nova.redis.hget(nova.keys.job(job), "retention_s") == "3600"
    assert nova.redis.hget(nova.keys.job(default), "retention_s") == str(DEFAULT_RETENTION_S)
    assert nova.redis.zscore(nova.keys.expiring(), job) is None  # not finished yet
    nova.cancel(default)  # cancelled jobs expire too
    run_job(nova, job)
    finished_ms = int(nova.redis.hget(nova.keys.job(job), "finished_ms"))
    assert nova.redis.zscore(nova.keys.expiring(), job) == finished_ms + 3_600_000
    cancelled_ms = int(nova.redis.hget(nova.keys.job(default), "finished_ms"))
    assert nova.redis.zscore(nova.keys.expiring(), default) == cancelled_ms + 604_800_000


def test_an_expired_job_leaves_redis_with_its_tasks_and_index_entries(short):
    nova = short
    join(nova, "w")
    job = setup_job(nova, 3, max_attempts=1)
    a, b, c = (nova.claim("w", "synthetic").leases[0] for _ in range(3))
    nova.complete("w", a, rkey(a), run_s=0.01, warm=True)
    nova.complete("w", b, rkey(b), run_s=0.01, warm=True)
    nova.fail("w", c, "error", "boom")  # failed for good: in `failed`
    assert nova.redis.zscore(nova.keys.failed(), c.task_id) is not None
    assert nova.redis.zscore(nova.keys.finished(), job) is not None
    other = setup_job(nova, 1)  # the enqueue runs the sweep
    for key in (nova.keys.job(job), *(nova.keys.task(f"{job}:{i}") for i in range(3))):
        assert not nova.redis.exists(key), key
    for index in (nova.keys.jobs(), nova.keys.finished(), nova.keys.expiring()):
        assert nova.redis.zscore(index, job) is None, index
    assert nova.redis.zscore(nova.keys.failed(), c.task_id) is None
    assert nova.redis.zscore(nova.keys.expired(), job) is not None  # the tombstone
    assert [e.fields for e in nova.events() if e.type == "job_expired"] == [
        {"job": job, "tasks": "3", "why": "retention"}]
    with pytest.raises(JobExpiredError, match=f"job {job} expired"):
        nova.job(job)
    with pytest.raises(TaskNotFoundError, match="its job expired"):
        nova.task(a.task_id)
    assert [j.job_id for j in nova.jobs()] == [other]  # the running one stays


def test_running_and_retried_jobs_are_never_expired(short):
    nova = short
    join(nova, "w")
    job = setup_job(nova, 2, max_attempts=1)
    [a] = nova.claim("w", "synthetic").leases
    nova.fail("w", a, "error", "boom")
    [b] = nova.claim("w", "synthetic").leases
    nova.complete("w", b, rkey(b), run_s=0.01, warm=True)  # done, with one failed task
    nova.retry(a.task_id)  # running again before the sweep ran
    assert nova.expire() == {"jobs": 0, "tasks": 0, "workers": 0, "more": 0}
    assert nova.job(job).state == "running"
    assert nova.redis.zscore(nova.keys.expiring(), job) is None  # the stale entry is dropped
    run_job(nova, job)  # finishes again: back in the index, then expired
    assert nova.expire()["jobs"] == 1
    with pytest.raises(JobExpiredError):
        nova.job(job)


def test_departed_workers_are_forgotten_unless_they_came_back(nova):
    for wid in ("left", "lost", "back"):
        join(nova, wid)
    nova.deregister_worker("left")
    expire_worker(nova, "lost")
    nova.reap()
    nova.deregister_worker("back")
    departed = nova.redis.zrange(nova.keys.departed(), 0, -1)
    assert sorted(departed) == ["back", "left", "lost"]
    assert nova.expire()["workers"] == 0  # gone for less than the retention: kept
    for wid in departed:
        departed_long_ago(nova, wid)
    join(nova, "back")  # joined again before the sweep
    assert nova.expire()["workers"] == 2
    for wid in ("left", "lost"):
        assert not nova.redis.exists(nova.keys.worker(wid), nova.keys.held(wid))
        assert nova.redis.zscore(nova.keys.workers(), wid) is None
    assert nova.redis.zscore(nova.keys.workers(), "back") is not None
    assert nova.redis.zcard(nova.keys.departed()) == 0
    assert [w.worker_id for w in nova.workers()] == ["back"]


def test_purge_deletes_a_finished_job_now_and_refuses_a_running_one(nova):
    join(nova, "w")
    job = setup_job(nova, 3)
    with pytest.raises(InvalidStateError, match="is queued"):
        nova.purge(job)
    assert nova.job(job).total == 3  # nothing deleted
    run_job(nova, job)
    assert nova.purge(job) == 3  # a 7-day retention does not matter
    assert not nova.redis.exists(nova.keys.job(job), nova.keys.task(f"{job}:0"))
    with pytest.raises(JobExpiredError):
        nova.purge(job)
    with pytest.raises(JobNotFoundError) as info:
        nova.purge("never-was")
    assert not isinstance(info.value, JobExpiredError)
    assert [e.fields["why"] for e in nova.events() if e.type == "job_expired"] == ["purge"]


def test_finished_before_lists_jobs_by_their_finish_time(nova):
    join(nova, "w")
    old = setup_job(nova, 1)
    run_job(nova, old)
    nova.redis.hset(nova.keys.job(old), "finished_ms", 1000)
    new = setup_job(nova, 1)
    nova.cancel(new)
    running = setup_job(nova, 1)
    nova.redis.hset(nova.keys.job(running), "finished_ms", "x")  # forged: not a finished job
    assert list(nova.finished_before(10_000)) == [old]
    assert sorted(nova.finished_before(nova.server_time_ms() + 1)) == sorted([old, new])


def test_a_job_that_expired_with_many_tasks_takes_several_sweeps(nova):
    job = nova.enqueue("synthetic", [TaskSpec("t")] * 5000)
    nova.cancel(job)
    finished_long_ago(nova, job)
    first = nova.expire()
    assert first["tasks"] == 1992 and first["more"] == 1 and first["jobs"] == 0
    assert nova.redis.hget(nova.keys.job(job), "state") == "expired"
    with pytest.raises(JobExpiredError):  # being deleted: already reads as expired
        nova.job(job)
    assert nova.redis.zscore(nova.keys.jobs(), job) is None  # out of the listings at once
    assert nova.sweep(10_000)["jobs"] == 1
    assert not nova.redis.exists(nova.keys.job(job), nova.keys.task(f"{job}:4999"))


def test_a_steady_stream_of_jobs_keeps_the_namespace_bounded(short):
    nova = short
    join(nova, "w")
    sizes = []
    for i in range(120):
        nova.renew("w", [])  # the worker's heartbeat, as a real worker sends: on a busy
        # machine the 120 jobs outlast a lease TTL, and a silent worker is reaped (and, with
        # retention 0, forgotten at once)
        job = setup_job(nova, 3)
        run_job(nova, job)
        sizes.append(len(ns_keys(nova)))
    # per namespace: the running job's 1 + 3 keys, the indexes, meta, events, the worker's
    assert max(sizes[20:]) == max(sizes[:20]) and max(sizes) < 30, sizes
    assert nova.redis.zcard(nova.keys.expired()) >= 100  # the tombstones, capped elsewhere
    # the keys' sizes too: with one owner no claim drops a taken job from the owner's
    # queue (only fair share does), so the retention sweep must (the soak found it growing)
    owner = nova.redis.hget(nova.keys.job(job), "owner") or ""
    assert nova.redis.zcard(nova.keys.app_owner_queue("synthetic", owner)) <= 2


def test_an_expired_job_leaves_its_owners_queue_and_an_empty_queue_its_owner(short):
    nova = short
    join(nova, "w")
    job = setup_job(nova, 2, owner="ann")
    queue, owners = nova.keys.app_owner_queue("synthetic", "ann"), nova.keys.app_owners("synthetic")
    assert nova.redis.zscore(queue, job) is not None and nova.redis.sismember(owners, "ann")
    run_job(nova, job)  # one owner: the claims leave the job in the queue
    setup_job(nova, 1, owner="bob")  # the enqueue runs the sweep
    assert nova.redis.zcard(queue) == 0
    assert not nova.redis.sismember(owners, "ann") and nova.redis.sismember(owners, "bob")


@pytest.mark.parametrize("bad", [-1, MAX_RETENTION_S + 1, 1.5, "7"])
def test_bad_retentions_are_refused(nova, bad):
    with pytest.raises(InputError, match="retention must be an integer from 0 to"):
        nova.enqueue("synthetic", [TaskSpec("x")], retention_s=bad)


def test_the_retention_setting(monkeypatch):
    assert Settings().job_retention_s == 604_800
    assert Settings.from_env(environ={"NOVA_JOB_RETENTION_S": "60"}).job_retention_s == 60
    for bad in ("-5", str(MAX_RETENTION_S + 1)):
        with pytest.raises(ConfigError, match="job retention"):
            Settings.from_env(environ={"NOVA_JOB_RETENTION_S": bad})
    with pytest.raises(ConfigError, match="NOVA_JOB_RETENTION_S"):
        Settings.from_env(environ={"NOVA_JOB_RETENTION_S": "7d"})
