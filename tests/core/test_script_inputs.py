"""Every number and id a script takes is checked before anything is written, and a commit
must name its own lease's result key: what a worker can no longer forge.

The attack (issue 13, item 4): any worker can read another worker's lease fields (worker,
lease_gen, attempt_id) and call ``complete`` with them. ``run_s=-1e300`` drove the victim's
speed estimate to -1.5e298 and skewed the scheduler for everyone; an arbitrary result key
pointed the task at any object in the store. Identity itself cannot be proven over a shared
Redis login (docs/SECURITY.md); what the script can check, it now checks.
"""

from __future__ import annotations

import json

import pytest
from novatests.leases import rkey

from nova_queue import TaskSpec
from nova_queue.claim_args import ClaimArgs
from nova_queue.errors import BAD_INPUT, WRONG_WORKER, InputError
from nova_queue.stores import result_key as store_result_key


def leased(nova, wid="victim", n=2):
    nova.enqueue("synthetic", [TaskSpec(f"p{i}", 1.0) for i in range(n)])
    nova.register_worker(wid, {"name": wid}, ["synthetic"])
    nova.register_worker("mallory", {"name": "mallory"}, ["synthetic"])
    return nova.claim(wid, "synthetic").leases[0]


def commit_raw(nova, wid, lease, key, run_s="1.0", warm="1", alpha="0.3", maxlen="1000",
               meta="{}", inline=""):
    """complete-11 as any EVALSHA caller sends it: no client-side checks."""
    keys = [nova.keys.task(lease.task_id), nova.keys.job(lease.job_id),
            *nova.worker.commit_keys(wid, lease.app)]
    args = [nova.prefix, wid, lease.task_id, lease.lease_gen, lease.attempt_id, key, run_s,
            warm, alpha, maxlen, meta, 3, 300_000, inline]
    return nova.scripts.call("complete", keys, args)


def snapshot(nova, lease, wid="victim"):
    r = nova.redis
    return (r.hgetall(nova.keys.task(lease.task_id)), r.hgetall(nova.keys.worker(wid)),
            r.hgetall(nova.keys.job(lease.job_id)), r.xlen(nova.keys.events()),
            r.zrange(nova.keys.app_fleet("synthetic"), 0, -1, withscores=True))


# -- the reported attack ------------------------------------------------------------------

def test_a_forged_completion_cannot_poison_the_victims_speed(nova):
    lease = leased(nova)
    nova.redis.hset(nova.keys.worker("victim"), mapping={"ema:synthetic": 2.0, "n:synthetic": 5})
    before = snapshot(nova, lease)
    # mallory reads the victim's lease from the task hash (the worker role may HGET)
    t = nova.redis.hgetall(nova.keys.task(lease.task_id))
    assert (t["worker"], t["lease_gen"], t["attempt_id"]) == ("victim", "1", lease.attempt_id)
    for run_s in ("-1e300", "-1", "nan", "inf", "-inf", "1e300", "604801", "abc", ""):
        res = commit_raw(nova, "victim", lease, rkey(lease), run_s=run_s)
        assert res[0] == BAD_INPUT and "run_s" in res[1], run_s
    assert snapshot(nova, lease) == before  # nothing written, not even an event
    with pytest.raises(InputError, match="run_s"):  # the client says so before sending
        nova.complete("victim", lease, rkey(lease), run_s=-1e300, warm=True)


@pytest.mark.parametrize("key", [
    "jobs/other/results/00000-g1-abc.png",              # another job's object
    "anything/at/all.png",
    "jobs/{job}/manifest.json",
    "jobs/{job}/results/00001-g1-{att}.png",             # another task of the job
    "jobs/{job}/results/00000-g2-{att}.png",             # another lease_gen
    "jobs/{job}/results/00000-g1-someoneelse.png",       # another attempt
    "jobs/{job}/results/0-g1-{att}.png",                 # not the store's format
    "jobs/{job}/results/00000-g1-{att}",                 # no extension
    "jobs/{job}/results/00000-g1-{att}.png/../../x",
    "jobs/{job}/results/00000-g1-{att}.p.ng",
    "jobs/{job}/results/00000-g1-{att}." + "x" * 17,
])
def test_a_commit_must_name_its_own_leases_result_key(nova, key):
    lease = leased(nova)
    before = snapshot(nova, lease)
    key = key.format(job=lease.job_id, att=lease.attempt_id)
    res = commit_raw(nova, "victim", lease, key)
    assert res[0] == BAD_INPUT and "result key must be" in res[1]
    assert snapshot(nova, lease) == before


@pytest.mark.parametrize("index,gen,ext", [(0, 1, "png"), (7, 12, "jpg"), (123456, 3, "webp")])
def test_the_stores_result_key_is_the_one_complete_accepts(nova, index, gen, ext):
    import dataclasses

    lease = leased(nova, "w", n=1)
    task = f"{lease.job_id}:{index}"  # seed the lease as claim would write it
    nova.redis.hset(nova.keys.task(task), mapping={
        "state": "leased", "worker": "w", "lease_gen": gen, "attempt_id": lease.attempt_id,
        "cost": 1})
    lease = dataclasses.replace(lease, task_id=task, index=index, lease_gen=gen)
    key = store_result_key(lease.job_id, index, gen, lease.attempt_id, ext)
    assert key == rkey(lease, ext)
    assert nova.complete("w", lease, key, run_s=0.5, warm=True).replayed is False
    assert nova.task(task).result == key


def test_a_stale_report_is_stale_whatever_else_it_carries(nova):
    lease = leased(nova)
    res = commit_raw(nova, "mallory", lease, "garbage", run_s="-1e300")
    assert res[0] == WRONG_WORKER  # the fence first: mallory does not hold the lease
    assert nova.task(lease.task_id).state == "leased"


# -- every other number ----------------------------------------------------------------------

@pytest.mark.parametrize("field,value", [
    ("alpha", "0"), ("alpha", "-0.1"), ("alpha", "1.5"), ("alpha", "nan"), ("alpha", "inf"),
    ("warm", "2"), ("warm", ""), ("maxlen", "0"), ("maxlen", "-1"), ("maxlen", "1e12"),
    ("meta", "[1, 2]"), ("meta", json.dumps({"x": "y" * 70_000})),
])
def test_complete_checks_every_number_before_writing(nova, field, value):
    lease = leased(nova)
    before = snapshot(nova, lease)
    res = commit_raw(nova, "victim", lease, rkey(lease), **{field: value})
    assert res[0] == BAD_INPUT
    assert snapshot(nova, lease) == before


def claim_raw(nova, **overrides):
    args = {"k": 1, "ttl": 10_000, "gap": 5000, "maxlen": 1000, "limit": 100, "ids": ["a1"]}
    args.update(overrides)
    claim = ClaimArgs("synthetic", args["k"], args["ttl"], args["gap"], args["limit"], 120_000,
                      "10", args["ids"])
    return nova.scripts.call("claim", nova.worker.claim_keys("w", "synthetic"),
                             [nova.prefix, "w", args["maxlen"], *claim.argv()])


@pytest.mark.parametrize("override", [
    {"k": 0}, {"k": -1}, {"k": 1.5}, {"k": 65, "ids": [f"a{i}" for i in range(65)]},
    {"k": 2}, {"ttl": 0}, {"ttl": -1}, {"ttl": 10**12}, {"ttl": "nan"}, {"gap": -1},
    {"maxlen": 0}, {"limit": 10**6}, {"limit": -1}, {"ids": ["has space"]}, {"ids": [""]},
    {"ids": ["x" * 65]},
])
def test_claim_checks_k_ttl_gap_maxlen_limit_and_ids_before_anything(nova, override):
    nova.enqueue("synthetic", [TaskSpec("p", 1.0)])
    nova.register_worker("w", {"name": "w"}, ["synthetic"])
    meta_before = nova.redis.hgetall(nova.keys.meta())
    events_before = nova.redis.xlen(nova.keys.events())
    res = claim_raw(nova, **override)
    assert res[0] == BAD_INPUT
    assert nova.redis.hgetall(nova.keys.meta()) == meta_before  # not even the clock tick
    assert nova.redis.xlen(nova.keys.events()) == events_before
    assert nova.pending_count("synthetic") == 1


def test_scripts_check_their_keys(nova, redis_url):
    from nova_queue import NovaClient

    lease = leased(nova, "w")
    other = NovaClient.from_url(redis_url, namespace=nova.keys.namespace + "-other")
    try:
        # off the hot path, KEYS must be exactly what Keyspace builds for the call
        res = nova.scripts.call("retry", [other.keys.task(lease.task_id),
                                          other.keys.job(lease.job_id),
                                          other.keys.pending("synthetic"), other.keys.failed(),
                                          other.keys.finished(), other.keys.events(),
                                          other.keys.meta()],
                                [nova.prefix, lease.task_id, 1000])
        assert res[0] == BAD_INPUT and "KEYS" in res[1]
        # complete: KEYS[1] and KEYS[2] must be the reported task's and its job's
        keys = [nova.keys.task(f"{lease.job_id}:1"), nova.keys.job(lease.job_id),
                *nova.worker.commit_keys("w", "synthetic")]
        res = nova.scripts.call("complete", keys, [
            nova.prefix, "w", lease.task_id, lease.lease_gen, lease.attempt_id, rkey(lease),
            "1.0", "1", "0.3", "1000", "{}", "3", "300000"])
        assert res[0] == BAD_INPUT and nova.task(lease.task_id).state == "leased"
    finally:
        other.close()


def test_renew_register_fail_and_reap_refuse_out_of_range_numbers(nova):
    lease = leased(nova, "w")
    k = nova.keys
    renew_keys = [k.worker("w"), k.leases(), k.alive(), k.inflight(), k.failed(), k.finished(),
                  k.meta(), k.events()]
    for ttl, gap, limit in ((0, 10, 10), (-5, 10, 10), (10**12, 10, 10), (1000, -1, 10),
                            (1000, 10, 10**9)):
        res = nova.scripts.call("renew", renew_keys, [nova.prefix, "w", ttl, gap, 1000, limit,
                                                      lease.task_id, lease.lease_gen,
                                                      lease.attempt_id])
        assert res[0] == BAD_INPUT
    res = nova.scripts.call("renew", renew_keys, [nova.prefix, "w", 1000, 10, 1000, 10,
                                                  "not a task id", "1", "x"])
    assert res[0] == BAD_INPUT
    reg_keys = [k.worker("x"), k.workers(), k.alive(), k.events(), k.meta(), k.idents()]
    res = nova.scripts.call("register", reg_keys, [nova.prefix, "x", 0, 1000, "{}", "synthetic",
                                                   "{}"])
    assert res[0] == BAD_INPUT and not nova.redis.exists(k.worker("x"))
    fail_keys = [k.task(lease.task_id), k.job(lease.job_id), k.worker("w"), k.held("w"),
                 k.pending("synthetic"), k.leases(), k.inflight(), k.failed(), k.finished(),
                 k.events()]
    res = nova.scripts.call("fail", fail_keys, [nova.prefix, "w", lease.task_id, lease.lease_gen,
                                                lease.attempt_id, "error", "boom", -1])
    assert res[0] == BAD_INPUT and nova.task(lease.task_id).state == "leased"
    with pytest.raises(InputError):
        nova.reap(limit=10**6)


def test_the_client_checks_what_it_sends(nova):
    lease = leased(nova)
    with pytest.raises(ValueError, match="k must be"):
        nova.claim("victim", "synthetic", k=65)
    for run_s in (float("nan"), float("inf"), -1.0, 1e9):
        with pytest.raises(InputError, match="run_s"):
            nova.complete("victim", lease, rkey(lease), run_s=run_s, warm=True)
    with pytest.raises(InputError, match="worker id"):
        nova.register_worker("bad id", {}, ["synthetic"])
    with pytest.raises(InputError, match="apps"):
        nova.register_worker("w9", {}, [f"a{i}" for i in range(65)])
    with pytest.raises(InputError, match="cost"):
        nova.enqueue("synthetic", [TaskSpec("p", 1e10)])


def test_a_task_input_written_by_hand_past_the_limit_is_failed_not_served(nova):
    job = nova.enqueue("synthetic", [TaskSpec(f"p{i}", 1.0) for i in range(3)])
    nova.register_worker("w", {"name": "w"}, ["synthetic"])
    nova.redis.hset(nova.keys.worker("w"), mapping={"ema:synthetic": 1.0, "n:synthetic": 1})
    nova.redis.hset(nova.keys.task(f"{job}:1"), "input", "x" * (2**20))
    res = nova.claim("w", "synthetic", k=3)
    assert [lease.index for lease in res.leases] == [0, 2]
    t = nova.task(f"{job}:1")
    assert t.state == "failed" and "input longer than" in t.error
    st = nova.job(job, with_tasks=False)
    assert (st.pending, st.leased, st.failed) == (0, 2, 1)
