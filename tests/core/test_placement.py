"""Placement in the claim, against seeded state: labels and requirements, memory after an
out-of-memory failure, fair share between owners, warm models first."""

from __future__ import annotations

import json
import re

import pytest
from novatests.seed import set_speed

from nova_queue import TaskSpec, shares
from nova_queue.errors import InputError
from nova_queue.keys import result_key
from nova_queue.placement import meets, parse_labels, parse_requirements, unmet


def join(nova, wid, labels=None, memory=None):
    fields = {"name": wid, "backend": "cpu", "labels": json.dumps(labels or {})}
    if memory is not None:
        fields["memory_total"] = memory
    nova.register_worker(wid, fields, ["synthetic"])


def job(nova, n=2, **kw):
    return nova.enqueue("synthetic", [TaskSpec(f"p{i}", 1.0) for i in range(n)], **kw)


def commit(nova, wid, lease, run_s=1.0):
    key = result_key(lease.job_id, lease.index, lease.lease_gen, lease.attempt_id, "png")
    nova.complete(wid, lease, key, run_s=run_s, warm=True)


# -- labels and requirements ---------------------------------------------------------------

def test_the_requirement_rule():
    reqs = parse_requirements(["backend=cuda,rocm", "memory_gb>=12", "site=lab"])
    assert meets({"backend": "rocm", "memory_gb": "24.0", "site": "lab"}, reqs)
    assert not meets({"backend": "cpu", "memory_gb": "24.0", "site": "lab"}, reqs)
    assert not meets({"backend": "cuda", "memory_gb": "8.0", "site": "lab"}, reqs)
    assert not meets({"backend": "cuda", "memory_gb": "24"}, reqs)  # a missing label
    assert meets({"memory_gb": "12"}, parse_requirements(["memory_gb<=12"]))
    assert "memory_gb>=12 is met by no live worker (live workers have memory_gb: 8.0)" in unmet(
        [{"memory_gb": "8.0", "backend": "cuda"}], reqs[1:2])
    for bad in ("backend", "memory_gb>=lots", "Key=1", "x=a b", "x>=", "x=" + "v," * 20):
        with pytest.raises(InputError):
            parse_requirements([bad])
    assert parse_labels(["gpu=4090,site=lab", "x=1"]) == {"gpu": "4090", "site": "lab", "x": "1"}
    with pytest.raises(InputError, match="key=value"):
        parse_labels(["gpu 4090"])


@pytest.mark.parametrize("requires, needle", [
    (["memory_gb>=lots"], "needs a number"),
    ([f"k{i}=a" for i in range(17)], "at most 16 requirements"),
    ([("memory_gb", ">=", ("lots",))], "needs a number"),  # a tuple is checked as its text
    ([("site", "in", ("a,b",))], "requirement 'site=a,b'"),
    ([("site", "in", ())], "requirement"),
    ([("Bad Key", "~", ("x",))], "requirement"),
    ([42], "requirement '42'"),
])
def test_the_api_refuses_bad_requirements_and_writes_nothing(nova, requires, needle):
    with pytest.raises(InputError, match=re.escape(needle)):
        job(nova, 1, requires=requires)
    assert nova.redis.keys(f"{nova.prefix}job:*") == []


@pytest.mark.parametrize("owner", ["bad owner", "<script>", "x" * 129, 5])
def test_the_api_refuses_a_bad_owner_and_writes_nothing(nova, owner):
    with pytest.raises(InputError, match="owner .*: use 1 to 128 of"):
        job(nova, 1, owner=owner)
    assert nova.redis.keys(f"{nova.prefix}job:*") == []
    ok = job(nova, 1, owner="ana@lab.example/team-1", requires=[("gpu", "in", ("4090",))])
    assert nova.job(ok, with_tasks=False).owner == "ana@lab.example/team-1"
    assert list(nova.job(ok, with_tasks=False).requires) == [("gpu", "in", ("4090",))]


def test_the_claim_gives_a_job_only_to_workers_that_meet_it(nova):
    gpu_job = job(nova, 2, requires=["backend=cuda,rocm", "memory_gb>=12"])
    cpu_job = job(nova, 2)
    join(nova, "cpu", {"backend": "cpu", "memory_gb": "64"})
    join(nova, "small", {"backend": "cuda", "memory_gb": "8"})
    join(nova, "big", {"backend": "cuda", "memory_gb": "24"})
    for wid in ("cpu", "small", "big"):
        set_speed(nova, wid, "synthetic", 0.1)
    # the GPU job is first in the queue, but it does not block those that cannot take it
    got = {wid: [(x.job_id, x.index) for x in nova.claim(wid, "synthetic", k=2).leases]
           for wid in ("cpu", "small")}
    assert got == {"cpu": [(cpu_job, 0), (cpu_job, 1)], "small": []}
    assert [x.job_id for x in nova.claim("big", "synthetic", k=2).leases] == [gpu_job] * 2
    assert nova.job(gpu_job, with_tasks=False).requires == tuple(
        parse_requirements(["backend=cuda,rocm", "memory_gb>=12"]))
    assert nova.eligible_workers("synthetic", nova.job(gpu_job, with_tasks=False).requires) == [
        "big"]


def test_the_policy_waits_only_for_workers_that_may_take_the_job(nova):
    """A faster worker that the job's requirements rule out does not make this one wait."""
    job(nova, 1, requires=["site=lab"])
    join(nova, "lab", {"site": "lab"})
    join(nova, "fast-elsewhere", {"site": "home"})
    set_speed(nova, "lab", "synthetic", 1.0)
    set_speed(nova, "fast-elsewhere", "synthetic", 0.01)
    assert len(nova.claim("lab", "synthetic").leases) == 1


def test_after_oom_a_smaller_batch_may_take_it(nova):
    job(nova, 1, max_attempts=5)
    join(nova, "8g", memory=8 << 30)
    join(nova, "8g-other", memory=8 << 30)
    join(nova, "24g", memory=24 << 30)
    for wid in ("8g", "8g-other", "24g"):
        set_speed(nova, wid, "synthetic", 0.1)
    lease = nova.claim("8g", "synthetic", k=2).leases[0]
    nova.fail("8g", lease, "oom", "CUDA out of memory", batch=2)
    h = nova.redis.hgetall(nova.keys.task(lease.task_id))
    assert (int(float(h["oom_memory"])), h["oom_batch"]) == (8 << 30, "2")
    assert nova.claim("8g-other", "synthetic", k=2).status == "wait"  # as small, as big a batch
    again = nova.claim("8g", "synthetic", k=1).leases  # a smaller batch may fit
    assert [x.task_id for x in again] == [lease.task_id]


def test_oom_goes_to_a_larger_worker_first(nova):
    job(nova, 1, max_attempts=5)
    join(nova, "8g", memory=8 << 30)
    join(nova, "8g-b", memory=8 << 30)
    join(nova, "24g", memory=24 << 30)
    for wid in ("8g", "8g-b", "24g"):
        set_speed(nova, wid, "synthetic", 0.1)
    lease = nova.claim("8g", "synthetic").leases[0]
    nova.fail("8g", lease, "oom", "CUDA out of memory", batch=1)
    assert nova.claim("8g-b", "synthetic").status == "wait"  # the 24 GB worker is live
    assert nova.claim("24g", "synthetic").leases[0].task_id == lease.task_id


def test_oom_may_run_again_when_no_larger_worker_is_live(nova):
    job(nova, 1, max_attempts=5)
    join(nova, "8g", memory=8 << 30)
    join(nova, "8g-b", memory=8 << 30)
    set_speed(nova, "8g", "synthetic", 0.1)
    set_speed(nova, "8g-b", "synthetic", 0.1)
    lease = nova.claim("8g", "synthetic").leases[0]
    nova.fail("8g", lease, "oom", "CUDA out of memory", batch=1)
    assert nova.claim("8g-b", "synthetic").leases[0].task_id == lease.task_id


# -- fair share ------------------------------------------------------------------------------

def test_fair_share_serves_the_owner_with_the_least_usage(nova):
    backlog = job(nova, 20, owner="alice")
    newcomer = job(nova, 3, owner="bob")
    join(nova, "w")
    set_speed(nova, "w", "synthetic", 0.1)
    first = nova.claim("w", "synthetic").leases[0]
    commit(nova, "w", first, run_s=5.0)  # alice has used 5 worker-seconds, bob none
    order = []
    for _ in range(6):
        lease = nova.claim("w", "synthetic").leases[0]
        order.append(lease.job_id)
        commit(nova, "w", lease, run_s=1.0)
    # bob's job starts at once and runs until its usage passes alice's; then they share
    assert order[:3] == [newcomer] * 3 and order[3:] == [backlog] * 3
    usage = {o.owner: o.usage_s for o in shares.owners(nova)}
    assert usage["alice"] == pytest.approx(8.0, rel=0.01)
    assert usage["bob"] == pytest.approx(3.0, rel=0.01)


def test_usage_decays_by_half_per_half_life_and_survives_a_half_life_change(nova):
    """Usage is one forward-decayed field per owner (note_usage.lua): moving the phase by
    one stands for one half-life passed; a new half-life keeps every owner's usage now."""
    a = job(nova, 4, owner="alice")
    job(nova, 4, owner="bob")
    join(nova, "w")
    set_speed(nova, "w", "synthetic", 0.1)
    lease = nova.claim("w", "synthetic").leases[0]
    assert lease.job_id == a  # no usage yet: by name
    commit(nova, "w", lease, run_s=4.0)

    def usage():
        return {o.owner: o.usage_s for o in shares.owners(nova)}
    assert usage()["alice"] == pytest.approx(4.0, rel=1e-4) and usage()["bob"] == 0
    nova.redis.hincrbyfloat(nova.keys.usage(), "phase", 1.0)  # one half-life later
    assert usage()["alice"] == pytest.approx(2.0, rel=1e-4)
    shares.set_half_life(nova, 60)
    assert usage()["alice"] == pytest.approx(2.0, rel=1e-3)  # (a few ms of decay at 60 s)
    assert shares.half_life_s(nova) == 60
    with pytest.raises(InputError, match="half-life"):
        shares.set_half_life(nova, 0.5)
    # bob's claim is charged its predicted time at once; a commit of a shorter run
    # settles it down to zero, and the field goes rather than going negative
    lease = nova.claim("w", "synthetic").leases[0]
    assert lease.job_id != a and lease.predicted_s > 0
    assert usage()["bob"] == pytest.approx(lease.predicted_s, rel=1e-3)
    commit(nova, "w", lease, run_s=0.0)
    assert usage()["bob"] == 0 and nova.redis.hget(nova.keys.usage(), "f:bob") is None
    # a forged field beyond the cap counts as the cap, and the claim still answers
    nova.redis.hset(nova.keys.usage(), "f:bob", "1e308")
    assert usage()["bob"] == pytest.approx(1e15)
    assert nova.claim("w", "synthetic").leases[0].job_id == a


def test_shares_weigh_usage(nova):
    a = job(nova, 10, owner="alice")
    b = job(nova, 10, owner="bob")
    nova.redis.hset(nova.keys.shares(), mapping={"alice": 3, "bob": 1})
    join(nova, "w")
    set_speed(nova, "w", "synthetic", 0.1)
    got = []
    for _ in range(8):
        lease = nova.claim("w", "synthetic").leases[0]
        got.append(lease.job_id)
        commit(nova, "w", lease, run_s=1.0)
    assert got.count(a) == 6 and got.count(b) == 2  # 3 : 1


def test_an_owner_whose_tasks_are_all_taken_leaves_the_index(nova):
    a = job(nova, 1, owner="alice")
    job(nova, 1, owner="bob")
    join(nova, "w")
    set_speed(nova, "w", "synthetic", 0.1)
    k = nova.keys
    assert nova.redis.smembers(k.app_owners("synthetic")) == {"alice", "bob"}
    leases = [nova.claim("w", "synthetic").leases[0] for _ in range(2)]
    job(nova, 1, owner="bob")
    nova.claim("w", "synthetic")  # visits alice's queue first (a tie): nothing left there
    assert nova.redis.smembers(k.app_owners("synthetic")) == {"bob"}
    nova.fail("w", next(x for x in leases if x.job_id == a), "error", "boom")  # requeued
    assert "alice" in nova.redis.smembers(k.app_owners("synthetic"))
    assert nova.redis.zscore(k.app_owner_queue("synthetic", "alice"), a) is not None


# -- warm models -----------------------------------------------------------------------------

def test_a_worker_takes_the_job_of_its_warm_model_first(nova):
    a = job(nova, 4, model="model-a")
    b = job(nova, 4, model="model-b")
    join(nova, "w")
    set_speed(nova, "w", "synthetic", 0.1)
    nova.note_loaded("w", "synthetic", "model-b", 2.0)
    assert nova.claim("w", "synthetic").leases[0].job_id == b  # B first: it holds B
    info = {w.worker_id: w for w in nova.workers()}["w"]
    assert info.warm == {"synthetic": "model-b"} and info.model_loads == 1
    assert a  # A waits for a worker that holds it, or for B to run out


def test_cold_workers_spread_over_the_models(nova):
    a = job(nova, 8, model="model-a")
    b = job(nova, 8, model="model-b")
    picks = []
    for wid in ("w1", "w2", "w3", "w4"):
        join(nova, wid)
        set_speed(nova, wid, "synthetic", 0.1)
        lease = nova.claim(wid, "synthetic").leases[0]
        picks.append(lease.job_id)
    assert picks == [a, b, a, b]
    assert nova.redis.hgetall(nova.keys.app_warm("synthetic")) == {"model-a": "2", "model-b": "2"}


def test_a_lost_worker_no_longer_holds_its_model(nova):
    from novatests.seed import expire_worker

    job(nova, 2, model="model-a")
    join(nova, "w")
    set_speed(nova, "w", "synthetic", 0.1)
    nova.claim("w", "synthetic")
    assert nova.redis.hget(nova.keys.app_warm("synthetic"), "model-a") == "1"
    expire_worker(nova, "w")
    nova.reap()
    assert nova.redis.hget(nova.keys.app_warm("synthetic"), "model-a") is None


def test_the_policy_counts_another_workers_load_time(nova):
    """A slow worker that holds the job's model warm waits for a fast idle one that holds it
    too, but not for one that would load it first for longer than the work takes."""
    job(nova, 2, model="model-a")
    for wid, speed in (("slow", 1.0), ("fast", 0.1)):
        join(nova, wid)
        set_speed(nova, wid, "synthetic", speed)
    nova.note_loaded("slow", "synthetic", "model-a", 1.0)
    nova.note_loaded("fast", "synthetic", "model-a", 100.0)
    assert nova.claim("slow", "synthetic").status == "wait"  # fast holds it: faster
    nova.note_loaded("fast", "synthetic", "model-b", 100.0)  # fast now holds another one
    assert nova.claim("slow", "synthetic").leases[0].job_id  # fast would load 100 s first
