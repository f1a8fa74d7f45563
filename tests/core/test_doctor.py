"""``nova-queue doctor`` against a real Redis: a healthy namespace is ok; each broken
invariant is reported with its keys, confirmed atomically, and repaired without touching a
committed result; what cannot be repaired is only reported."""

from __future__ import annotations

import uuid

import pytest
import redis
from novatests.leases import join, rkey, setup_job
from novatests.seed import expire_worker

from nova_queue import NovaClient, TaskSpec, doctor, shares
from nova_queue.doctor import Finding
from nova_queue.local import RedisServer


def pool(nova):
    """A namespace with a job in every state: done, failed, cancelled, running, queued."""
    join(nova, "w")
    done, running = setup_job(nova, 2, max_attempts=1), setup_job(nova, 3)
    a, b = (nova.claim("w", "synthetic").leases[0] for _ in range(2))
    nova.complete("w", a, rkey(a), run_s=0.1, warm=True)
    nova.fail("w", b, "error", "boom")  # failed for good; its job is done
    [held] = nova.claim("w", "synthetic").leases  # a lease of the running job
    cancelled = setup_job(nova, 1)
    nova.cancel(cancelled)
    return {"done": done, "running": running, "cancelled": cancelled, "lease": held,
            "committed": a}


def problems(nova):
    return [f.message for f in doctor.diagnose(nova).problems]


def test_a_healthy_namespace_is_ok(nova):
    pool(nova)
    join(nova, "gone")
    nova.deregister_worker("gone")
    report = doctor.diagnose(nova)
    assert report.ok, [f.message for f in report.problems]
    assert report.checked["jobs"] == 3 and report.checked["tasks"] == 6
    assert report.to_json()["ok"] is True


def test_a_job_still_staging_is_ok(nova):
    """A large job's chunks are written before it is published: its tasks are pending in
    its stage set, its counts zero until the publishing call."""
    import json

    k = nova.keys
    keys = [k.job("big"), k.jobs(), k.staging(), k.stage("big"), k.pending("synthetic"),
            k.seq(), k.events(), k.apps(), k.meta()]
    fields = json.dumps({"app": "synthetic", "params": "{}", "priority": 0, "max_attempts": 3,
                         "total": 4})
    assert nova.scripts.call("enqueue", keys, [nova.prefix, "big", 1, 0, fields, 0, 1000,
                                               "a", "1", "b", "1"])[0] == 0
    assert nova.redis.hget(k.job("big"), "state") == "staging"
    assert not problems(nova)


def test_a_task_with_a_backup_attempt_held_by_both_workers_is_ok(nova):
    nova.enqueue("synthetic", [TaskSpec(f"b{i}") for i in range(2)])
    for wid in ("slow", "fast"):
        join(nova, wid)
        nova.redis.hset(nova.keys.worker(wid), mapping={"ema:synthetic": 0.1, "n:synthetic": 1})
    firsts = nova.claim("slow", "synthetic", k=2).leases
    for lease in firsts:
        nova.redis.hset(nova.keys.task(lease.task_id), "claimed_ms", 1)  # long overdue
    backup = nova.claim("fast", "synthetic").leases[0]
    assert backup.backup and nova.redis.hget(nova.keys.task(backup.task_id), "b_worker") == "fast"
    assert nova.redis.sismember(nova.keys.held("fast"), backup.task_id)
    assert not problems(nova)


def test_misplaced_tasks_are_found_with_their_keys_and_put_back(nova):
    p = pool(nova)
    k, r = nova.keys, nova.redis
    queued = f"{p['running']}:2"
    r.zrem(k.pending("synthetic"), queued)  # a task found nowhere
    r.zrem(k.leases(), p["lease"].task_id)  # a lease the reaper never sees
    r.zadd(k.pending("synthetic"), {p["committed"].task_id: 1})  # a done task in pending
    r.zrem(k.failed(), f"{p['done']}:1")
    report = doctor.diagnose(nova)
    found = {f.keys[0]: f for f in report.problems}
    assert set(found) == {k.task(queued), k.task(p["lease"].task_id),
                          k.task(p["committed"].task_id), k.task(f"{p['done']}:1")}
    assert "pending but not in its pending set (--repair: requeued)" in found[k.task(queued)].message
    assert k.pending("synthetic") in found[k.task(queued)].keys
    before = nova.task(p["committed"].task_id)
    after = doctor.run(nova, fix=True)
    assert after.ok and len([x for x in after.repaired if x.startswith("task ")]) == 4, after
    assert r.zscore(k.pending("synthetic"), queued) is not None
    assert r.zscore(k.leases(), p["lease"].task_id) is not None
    assert nova.task(p["committed"].task_id) == before  # the committed result is untouched
    assert [e.fields["target"] for e in nova.events() if e.type == "repaired"]


def test_a_lease_of_a_worker_redis_does_not_know_is_requeued(nova):
    p = pool(nova)
    tid = p["lease"].task_id
    nova.redis.delete(nova.keys.worker("w"), nova.keys.held("w"))
    nova.redis.zrem(nova.keys.alive(), "w")
    nova.redis.zrem(nova.keys.workers(), "w")
    [f] = [f for f in doctor.diagnose(nova).problems if f.check == "placement"]
    assert "lease of an unknown worker due now" in f.message
    report = doctor.run(nova, fix=True)
    assert report.ok, [x.message for x in report.problems]
    assert nova.task(tid).state == "pending"  # reaped at once, an attempt used


def test_counts_are_recounted_and_a_job_whose_tasks_all_ended_finishes(nova):
    p = pool(nova)
    k, r = nova.keys, nova.redis
    r.hset(k.job(p["running"]), mapping={"done": 7, "pending": 0})
    r.hset(k.job(p["done"]), "state", "running")
    r.hdel(k.job(p["done"]), "finished_ms")
    r.zrem(k.expiring(), p["done"])
    msgs = problems(nova)
    assert any("done 7 for 0 tasks" in m for m in msgs), msgs
    assert any("every task is terminal but it is running" in m for m in msgs), msgs
    report = doctor.run(nova, fix=True)
    assert report.ok, [x.message for x in report.problems]
    assert nova.job(p["running"]).pending == 2 and nova.job(p["running"]).done == 0
    assert nova.job(p["done"]).state == "done"
    assert r.zscore(k.expiring(), p["done"]) is not None  # finished: retention entry too


def test_junk_members_index_entries_and_inflight_are_repaired(nova):
    p = pool(nova)
    k, r = nova.keys, nova.redis
    r.zadd(k.pending("synthetic"), {"junk": 1, "nojob:3": 2})
    r.zadd(k.leases(), {"ghost:0": 1})
    r.sadd(k.held("w"), f"{p['done']}:0")  # done: w leases it no more
    r.zrem(k.jobs(), p["cancelled"])
    r.zrem(k.expiring(), p["cancelled"])  # as a release before retention left it
    r.hset(k.inflight(), "synthetic", 5)
    join(nova, "left")
    nova.deregister_worker("left")
    r.zrem(k.departed(), "left")  # would never be forgotten
    assert len(problems(nova)) == 7, problems(nova)  # the job's two entries are one
    report = doctor.run(nova, fix=True)
    assert report.ok, [x.message for x in report.problems]
    assert r.zscore(k.jobs(), p["cancelled"]) is not None
    assert r.hget(k.inflight(), "synthetic") == "1"
    assert r.zscore(k.departed(), "left") is not None
    assert not r.sismember(k.held("w"), f"{p['done']}:0")


def test_orphans_are_reported_not_deleted(nova):
    r, k = nova.redis, nova.keys
    pool(nova)
    r.hset(k.task("lostjob:0"), "state", "done")
    r.zadd(k.stage("nojob"), {"nojob:0": 1})
    r.set(k.prefix + "stray", "1")
    r.sadd(k.held("nobody"), "x:0")
    assert any("held:nobody belongs to no worker" in m for m in problems(nova))
    report = doctor.run(nova, fix=True)
    orphans = [f.message for f in report.findings if f.check == "orphans"]
    assert any("1 task keys of job lostjob" in m and "purge lostjob" in m for m in orphans), orphans
    assert any("stage:nojob belongs to no job" in m for m in orphans)
    assert any("stray" in m for m in orphans)
    assert r.exists(k.task("lostjob:0"), k.stage("nojob"), k.prefix + "stray") == 3
    assert not r.exists(k.held("nobody"))  # its one member, leased by nobody, was dropped
    assert not report.ok


def test_a_finding_that_no_longer_holds_is_not_reported(nova):
    p = pool(nova)
    stale = Finding("placement", "task seemed misplaced", repair=("task", p["lease"].task_id))
    assert doctor.confirm(nova, [stale]) == []


def test_another_protocol_is_a_problem_and_nothing_else_is_judged(nova):
    pool(nova)
    nova.redis.hset(nova.keys.meta(), "protocol", "4")
    report = doctor.run(nova, fix=True)
    assert [f.check for f in report.findings] == ["protocol"]
    assert "speaks protocol '4'" in report.problems[0].message and not report.repaired


def test_live_workers_of_a_release_before_protocol_checks_are_named(nova):
    join(nova, "old")
    nova.redis.hdel(nova.keys.worker("old"), "protocol")
    warnings = [f.message for f in doctor.diagnose(nova).warnings if f.check == "protocol"]
    assert warnings == [("worker old is live but was registered by a release before protocol "
                         "checks: upgrade it")]
    expire_worker(nova, "old")


@pytest.mark.parametrize("args, problem, warning", [
    (("--maxmemory-policy", "allkeys-lru"), "maxmemory-policy is allkeys-lru", "persistence"),
    (("--appendonly", "yes"), None, None),
])
def test_redis_settings_that_break_guarantees(redis_server_bin, args, problem, warning):
    server = RedisServer(*args, binary=redis_server_bin).start()
    try:
        client = NovaClient.from_url(server.url, namespace="settings")
        report = doctor.diagnose(client)
        got = [f.message for f in report.problems if f.check == "settings"]
        assert (got[0].startswith(problem) if problem else not got), got
        warned = [f.message for f in report.warnings if f.check == "settings"]
        assert (warning in warned[0] if warning else not warned), warned
        client.close()
    finally:
        server.close()


def test_a_user_without_config_gets_a_warning_not_a_crash(nova, redis_url):
    user = f"admin-{uuid.uuid4().hex[:8]}"
    nova.redis.acl_setuser(user, enabled=True, passwords=["+pw"], keys=[f"{nova.prefix}*"],
                           commands=["+@all", "-@dangerous"], reset=True)
    try:
        admin = NovaClient(redis.Redis.from_url(redis_url, username=user, password="pw",
                                                decode_responses=True), namespace=nova.keys.namespace)
        pool(nova)
        report = doctor.diagnose(admin)
        [f] = [f for f in report.findings if f.check == "settings"]
        assert f.severity == "warning" and "not checked" in f.message
        assert report.ok, [x.message for x in report.problems]
    finally:
        nova.redis.acl_deluser(user)


def test_placement_keys_are_known_and_a_job_missing_from_its_owners_queue_is_put_back(nova):
    """Fair share walks the owners' queues only: a job with pending tasks that is in none
    (a release before fair share enqueued it, or a key was lost) would wait while two
    owners have work. The doctor finds it and --repair queues it again; the placement keys
    (owners, their queues, usage, shares, warm models) are no orphans."""
    k, r = nova.keys, nova.redis
    join(nova, "w")
    a = nova.enqueue("synthetic", [TaskSpec(f"a{i}") for i in range(3)], owner="alice")
    b = nova.enqueue("synthetic", [TaskSpec(f"b{i}") for i in range(3)], owner="bob")
    shares.set_share(nova, "bob", 2)
    lease = nova.claim("w", "synthetic").leases[0]  # fair share: usage is charged
    nova.complete("w", lease, rkey(lease), run_s=0.1, warm=True)
    nova.note_loaded("w", "synthetic", "model-a", 0.5)
    assert r.exists(k.usage(), k.shares(), f"{nova.prefix}app:synthetic:warm") == 3
    report = doctor.diagnose(nova)
    orphans = [f.message for f in report.findings if f.check == "orphans"]
    assert report.ok and not orphans, orphans
    queue = f"{nova.prefix}app:synthetic:owner:bob"
    r.zrem(queue, b)
    found = [f for f in doctor.diagnose(nova).problems if f.keys[0] == k.job(b)]
    assert found and "in its owner's queue" in found[0].message, found
    assert doctor.run(nova, fix=True).ok
    assert r.zscore(queue, b) is not None
    assert r.sismember(f"{nova.prefix}app:synthetic:owners", "bob")
    got = {nova.claim("w", "synthetic").leases[0].job_id for _ in range(4)}
    assert got == {a, b}  # both owners are served again
