"""The claim policy: predicted completion time decides who takes the tail."""

import uuid

import hypothesis.strategies as st
from hypothesis import HealthCheck, given, settings
from novatests.seed import set_speed

from nova_queue import NovaClient, TaskSpec


def join(nova, wid, bench=None):
    nova.register_worker(wid, {"name": wid, "backend": "cpu"}, ["synthetic"],
                         {"synthetic": {"bench_s": bench}} if bench else None)


def fast_and_slow(nova, slow_s=10.0):
    """Workers "fast" (1 s per cost unit, measured) and "slow" (``slow_s``)."""
    for wid, s_per_cost in (("fast", 1.0), ("slow", slow_s)):
        join(nova, wid)
        set_speed(nova, wid, "synthetic", s_per_cost)


def enqueue(nova, n, cost=1.0):
    return nova.enqueue("synthetic", [TaskSpec(f"p{i}", cost) for i in range(n)])


def test_slow_worker_waits_for_the_tail(nova):
    enqueue(nova, 3)
    fast_and_slow(nova, slow_s=10.0)
    res = nova.claim("slow", "synthetic")
    assert res.status == "wait"
    assert 0.05 <= res.retry_after_s <= 1.0
    assert nova.claim("fast", "synthetic").status == "ok"


def test_slow_worker_claims_while_many_tasks_remain(nova):
    enqueue(nova, 100)
    fast_and_slow(nova, slow_s=10.0)
    assert nova.claim("slow", "synthetic").status == "ok"


def test_boundary_exactly_as_the_formula_says(nova):
    # fast finishes ceil(10/1) - 1 = 9 tasks strictly before slow would finish one:
    # with R = 9 slow waits; with R = 10 the others cannot finish all first, so slow claims.
    fast_and_slow(nova, slow_s=10.0)
    enqueue(nova, 9)
    assert nova.claim("slow", "synthetic").status == "wait"
    enqueue(nova, 1)
    assert nova.claim("slow", "synthetic").status == "ok"


def test_equal_workers_never_wait_on_each_other(nova):
    enqueue(nova, 1)
    for w in ("a", "b", "c"):
        join(nova, w)
        set_speed(nova, w, "synthetic", 1.0)
    assert nova.claim("b", "synthetic").status == "ok"


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(speeds=st.lists(st.floats(0.01, 100), min_size=1, max_size=6),
       pending=st.integers(1, 12), batch=st.integers(1, 4))
def test_the_fastest_idle_worker_always_gets_work(redis_url, speeds, pending, batch):
    """Liveness: whatever the fleet, the fastest idle worker is never told to wait."""
    nova = NovaClient.from_url(redis_url, namespace=f"live-{uuid.uuid4().hex[:10]}")
    try:
        enqueue(nova, pending)
        for i, s in enumerate(speeds):
            join(nova, f"w{i}")
            set_speed(nova, f"w{i}", "synthetic", s)
        fastest = f"w{speeds.index(min(speeds))}"
        res = nova.claim(fastest, "synthetic", k=batch)
        assert res.status == "ok" and len(res.leases) >= 1
    finally:
        for key in nova.redis.scan_iter(match=nova.prefix + "*"):
            nova.redis.delete(key)
        nova.close()


def test_busy_fast_worker_counts_its_predicted_free_time(nova):
    enqueue(nova, 3)
    fast_and_slow(nova, slow_s=2.0)
    now = nova.server_time_ms()
    # fast is busy for another 100 s: slow should not wait for it
    nova.redis.hset(nova.keys.worker("fast"), "busy_until_ms", now + 100_000)
    assert nova.claim("slow", "synthetic").status == "ok"


def test_unknown_worker_explores(nova):
    enqueue(nova, 2)
    join(nova, "fast")
    set_speed(nova, "fast", "synthetic", 0.01)
    join(nova, "newbie")
    res = nova.claim("newbie", "synthetic", k=4)
    assert res.status == "ok" and len(res.leases) == 1  # explores one task


def test_benchmark_prior_calibrated_by_the_fleet(nova):
    enqueue(nova, 2)
    join(nova, "veteran", bench=1.0)
    set_speed(nova, "veteran", "synthetic", 2.0)  # measured 2x slower than its benchmark
    # newcomer benchmarks at 3 s/cost -> prior 6 s; veteran finishes ceil(6/2)-1 = 2 >= 2 first
    join(nova, "newcomer", bench=3.0)
    assert nova.claim("newcomer", "synthetic").status == "wait"
    score = nova.redis.zscore(nova.keys.app_fleet("synthetic"), "newcomer")
    assert score == 6.0


def test_batch_claim_is_trimmed_at_the_tail(nova):
    enqueue(nova, 6)
    join(nova, "gpu")
    join(nova, "other")
    set_speed(nova, "gpu", "synthetic", 1.0)
    set_speed(nova, "other", "synthetic", 1.0)
    # m-th task allowed while ceil(m) - 1 < 6 - m + 1  ->  m <= 3
    res = nova.claim("gpu", "synthetic", k=8)
    assert res.status == "ok" and len(res.leases) == 3


def test_fast_path_needs_no_fleet_scan_when_the_queue_is_long(nova):
    enqueue(nova, 1000)
    for i in range(20):
        join(nova, f"w{i}")
        set_speed(nova, f"w{i}", "synthetic", 1.0 + i)
    res = nova.claim("w19", "synthetic", k=4)
    assert len(res.leases) == 4


def test_dead_worker_does_not_hold_back_the_fleet(nova):
    from novatests.seed import expire_worker

    enqueue(nova, 3)
    fast_and_slow(nova, slow_s=10.0)
    expire_worker(nova, "fast")
    assert nova.claim("slow", "synthetic").status == "ok"
    assert nova.redis.zscore(nova.keys.app_fleet("synthetic"), "fast") is None
