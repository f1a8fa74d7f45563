"""Speed is earned, not declared: the claim policy counts on a worker only while it claims
(or runs what it claimed), a declared benchmark never beats the fastest measured worker, and
backup attempts go only to workers with measured runs. Against seeded state; the invariant
that no claiming worker waits for one that does not claim is a property over random fleets."""

from __future__ import annotations

import uuid

import hypothesis.strategies as st
from hypothesis import HealthCheck, given, settings
from novatests.leases import backdate, join, setup_job, task_hash
from novatests.seed import claiming, set_speed

from nova_queue import NovaClient


def phantom(nova, wid="phantom", bench_s=1e-9):
    """A worker that registers a benchmark of ``bench_s`` s per cost unit."""
    nova.register_worker(wid, {"name": wid, "backend": "cuda"}, ["synthetic"],
                         {"synthetic": {"bench_s": bench_s}})


def fleet_score(nova, wid):
    return nova.redis.zscore(nova.keys.app_fleet("synthetic"), wid)


def test_a_phantom_that_never_claims_holds_no_one_back(nova):
    """The issue's probe: a token registers 1e-9 s and keeps its heartbeat, never claims; every
    real worker was told to wait for it. Now the honest worker takes the work."""
    setup_job(nova, 20)
    phantom(nova)
    join(nova, "honest")
    set_speed(nova, "honest", "synthetic", 0.1)
    res = nova.claim("honest", "synthetic", k=4)
    assert res.status == "ok" and len(res.leases) == 4


def test_a_worker_that_stopped_claiming_is_not_waited_for(nova):
    setup_job(nova, 3)
    join(nova, "fast")
    join(nova, "slow")
    set_speed(nova, "fast", "synthetic", 1.0)
    set_speed(nova, "slow", "synthetic", 10.0)
    assert nova.claim("slow", "synthetic").status == "wait"  # fast claims: the tail is its
    window_ms = max(nova.settings.lease_ttl_ms, 5000)
    claiming(nova, "fast", ago_ms=window_ms + 1000)  # its last claim is older than the window
    assert nova.claim("slow", "synthetic").status == "ok"


def test_a_worker_running_what_it_claimed_still_counts(nova):
    """A worker that claimed long ago but runs what it claimed, within its predicted run, is
    working for the pool: others still count on it (free at its busy_until_ms). Once its
    predicted run is over by more than the window, it no longer holds anyone back."""
    setup_job(nova, 4)
    join(nova, "fast")
    join(nova, "slow")
    set_speed(nova, "fast", "synthetic", 1.0)
    set_speed(nova, "slow", "synthetic", 10.0)
    assert len(nova.claim("fast", "synthetic").leases) == 1
    window_ms = max(nova.settings.lease_ttl_ms, 5000)
    claiming(nova, "fast", ago_ms=window_ms + 1000)
    now = nova.server_time_ms()
    nova.redis.hset(nova.keys.worker("fast"), "busy_until_ms", now + 500)
    assert nova.claim("slow", "synthetic").status == "wait"
    nova.redis.hset(nova.keys.worker("fast"), "busy_until_ms", now - window_ms - 1000)
    assert nova.claim("slow", "synthetic").status == "ok"


def test_a_declared_benchmark_scores_no_faster_than_the_fastest_measured_worker(nova):
    join(nova, "measured")
    set_speed(nova, "measured", "synthetic", 0.5)
    phantom(nova)
    assert fleet_score(nova, "phantom") == 0.5
    phantom(nova, "slower", bench_s=2.0)  # a slower declaration stands as it is
    assert fleet_score(nova, "slower") == 2.0
    # its own claims estimate it no faster either: its predicted time is the measured one's
    setup_job(nova, 40)
    lease = nova.claim("phantom", "synthetic").leases[0]
    assert lease.predicted_s == 0.5


def test_an_unmeasured_worker_counts_as_no_faster_than_the_fastest_measured(nova):
    """A phantom that registered before any worker was measured keeps its 1e-9 in the
    fleet and claims (WAIT answers count): the policy still weighs it as no faster than the
    claiming worker's own measured speed, so equal workers never wait on each other."""
    phantom(nova)
    assert fleet_score(nova, "phantom") == 1e-9
    claiming(nova, "phantom")
    join(nova, "honest")
    set_speed(nova, "honest", "synthetic", 2.0)
    setup_job(nova, 3)
    res = nova.claim("honest", "synthetic")
    assert res.status == "ok", res


def test_backups_go_only_to_workers_with_measured_runs(nova):
    setup_job(nova, 1)
    join(nova, "slow")
    set_speed(nova, "slow", "synthetic", 0.5)
    primary = nova.claim("slow", "synthetic").leases[0]
    backdate(nova, primary.task_id, 5_000)  # overdue: a backup would save time
    phantom(nova)
    res = nova.claim("phantom", "synthetic")
    assert res.status == "wait" and res.leases == []
    assert "b_worker" not in task_hash(nova, primary.task_id)
    join(nova, "fast")
    set_speed(nova, "fast", "synthetic", 0.2)
    [backup] = nova.claim("fast", "synthetic").leases
    assert backup.backup and backup.task_id == primary.task_id


def test_every_answer_of_a_claim_notes_when_the_worker_claimed(nova):
    join(nova, "w")
    before = nova.server_time_ms()
    assert nova.claim("w", "synthetic").status == "empty"
    assert int(nova.redis.hget(nova.keys.worker("w"), "claim_ms")) >= before
    nova.redis.hdel(nova.keys.worker("w"), "claim_ms")
    setup_job(nova, 1)
    assert nova.claim("w", "synthetic").status == "ok"
    assert int(nova.redis.hget(nova.keys.worker("w"), "claim_ms")) >= before


def test_a_registration_cannot_declare_itself_claiming(nova):
    from nova_queue.errors import InputError
    for field in ("claim_ms", "free_n", "free_since_ms"):
        try:
            nova.register_worker("w", {"name": "w", field: 9_999_999_999_999}, ["synthetic"])
        except InputError as exc:
            assert "invalid worker field name" in str(exc)
        else:
            raise AssertionError(f"{field} was accepted")


# -- the invariant, as a property ----------------------------------------------------------

worker_st = st.fixed_dictionaries({
    "speed": st.floats(0.01, 50),
    "measured": st.booleans(),
    # None: registered and never claimed; else how long ago (ms) its last claim was
    "claimed_ago_ms": st.one_of(st.none(), st.integers(0, 4_000), st.integers(30_000, 90_000)),
    # free now, or busy through the whole example: a busy time that ends mid-example (a few
    # seconds on a loaded machine) would answer the two claims compared from different fleets
    "busy_for_ms": st.one_of(st.just(0), st.integers(60_000, 120_000)),
})


def seed_fleet(nova, me_speed, others, pending, cost):
    setup_job(nova, pending, cost=cost)
    for i, w in enumerate(others):
        wid = f"o{i}"
        if w["measured"]:
            join(nova, wid)
            set_speed(nova, wid, "synthetic", w["speed"])
        else:
            phantom(nova, wid, bench_s=w["speed"])
        if w["claimed_ago_ms"] is None:
            nova.redis.hdel(nova.keys.worker(wid), "claim_ms")
        else:
            claiming(nova, wid, ago_ms=w["claimed_ago_ms"])
            if w["claimed_ago_ms"] <= 4_000:  # a busy worker claimed and is running
                now = nova.server_time_ms()
                nova.redis.hset(nova.keys.worker(wid), "busy_until_ms", now + w["busy_for_ms"])
    join(nova, "me")
    set_speed(nova, "me", "synthetic", me_speed)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(me_speed=st.floats(0.01, 50), others=st.lists(worker_st, min_size=1, max_size=5),
       pending=st.integers(1, 10), cost=st.sampled_from([0.5, 1.0, 3.0]), k=st.integers(1, 4))
def test_no_claiming_worker_waits_for_one_that_does_not_claim(redis_url, me_speed, others,
                                                              pending, cost, k):
    """While tasks are pending that a live, claiming worker (measured) can run, it is never
    told WAIT because of a worker that is not claiming: in the same fleet without the workers
    that do not claim (as if they had never joined) it gets no more. (With them it may get
    more: a slow measured one registered earlier made a phantom's score slower.)"""
    window_ms = 10_000  # the lease TTL of these clients (> MIN_CLAIMING_MS)
    answers = []
    for keep_idle in (True, False):
        kept = [w for w in others if keep_idle or (
            w["claimed_ago_ms"] is not None and w["claimed_ago_ms"] < window_ms)]
        nova = NovaClient.from_url(redis_url, namespace=f"prop-{uuid.uuid4().hex[:10]}")
        try:
            assert nova.settings.lease_ttl_ms == window_ms
            seed_fleet(nova, me_speed, kept, pending, cost)
            res = nova.claim("me", "synthetic", k=k)
            answers.append((res.status, len(res.leases)))
        finally:
            for key in nova.redis.scan_iter(match=nova.prefix + "*"):
                nova.redis.delete(key)
            nova.close()
    (with_status, with_n), (without_status, without_n) = answers
    assert with_n >= without_n, answers
    assert with_status != "wait" or without_status == "wait", answers
    assert answers[0][0] == "ok" or any(
        w["claimed_ago_ms"] is not None and w["claimed_ago_ms"] < window_ms for w in others)


def test_a_failed_task_is_not_left_to_a_worker_that_never_claims(nova):
    """A task that failed on a worker goes to others while one lives; a phantom that only
    registered is not one (the task waited for it forever)."""
    setup_job(nova, 1, max_attempts=3)
    join(nova, "honest")
    phantom(nova)
    lease = nova.claim("honest", "synthetic").leases[0]
    nova.fail("honest", lease, "error", "a transient error")
    again = nova.claim("honest", "synthetic").leases[0]
    assert again.task_id == lease.task_id and again.attempt == 2


def test_an_oom_task_does_not_wait_for_a_declared_memory_that_never_claims(nova):
    setup_job(nova, 1, max_attempts=3)
    join(nova, "small", memory_total=8 << 30)
    nova.register_worker("phantom", {"name": "phantom", "memory_total": 1 << 50}, ["synthetic"])
    lease = nova.claim("small", "synthetic").leases[0]
    nova.fail("small", lease, "oom", "CUDA out of memory")
    again = nova.claim("small", "synthetic")
    assert again.status == "ok" and again.leases[0].task_id == lease.task_id
    claiming(nova, "phantom")  # once it claims, the task waits for its memory
    lease = again.leases[0]
    nova.fail("small", lease, "oom", "CUDA out of memory")
    assert nova.claim("small", "synthetic").status == "wait"
