"""Scenarios 7 and 12: Redis itself fails. Killed with -9 and restarted on the same port and
AOF (a short outage, then one longer than the lease TTL); SCRIPT FLUSH mid-run; maxmemory
reached with noeviction. Workers must ride it out, nothing may be lost or doubled."""

from __future__ import annotations

import time

import pytest
import redis
from novatests.chaos.fleet import LEASE_TTL_S, Fleet, chaos_client, stop_cleanly
from novatests.chaos.history import check, invariants

from nova_queue import TaskSpec
from nova_queue.local import wait_for
from nova_queue.stores import open_store

pytestmark = pytest.mark.slow


def _done(nova, job) -> int:
    return nova.job(job, with_tasks=False).done


def _fleet(server, namespace, tmp_path, n=2) -> Fleet:
    fleet = Fleet(server.url, namespace, (tmp_path / "store").as_uri(), tmp_path / "homes")
    for i in range(n):
        fleet.start(f"w{i}", "--no-benchmark")
    return fleet


def _false_expiries(nova, since_ms: int) -> list:
    """Leases reaped after ``since_ms`` although their holders were alive."""
    return [e for e in nova.events(count=1_000_000)
            if e.ts_ms >= since_ms and e.type in ("requeued", "failed")
            and e.fields.get("kind") in ("expired", "lost")]


def test_redis_killed_with_aof_and_restarted(private_redis, namespace, tmp_path, record):
    """Scenario 7: kill -9 Redis twice mid-job (restart at once; then down for 2.5 TTLs).
    The AOF keeps every acknowledged write; workers reconnect and back off without crashing;
    the long outage opens a grace window, so no live lease is expired.

    Times are read from Redis *before* each kill: after a restart the workers may run a
    script before this test can (on a busy machine they often do), so a time read after
    the restart could come after the grace event it is meant to precede."""
    started = time.monotonic()
    server = private_redis("--appendonly", "yes", "--appendfsync", "everysec")
    nova = chaos_client(server.url, namespace)
    job = nova.enqueue("synthetic", [TaskSpec(f"aof {i}", 0.2) for i in range(30)],
                       params={"seconds": 0.2, "size": 64})
    fleet = _fleet(server, namespace, tmp_path)
    try:
        wait_for(lambda: _done(nova, job) >= 4, timeout_s=60, message="4 tasks done")
        before_short_ms = nova.server_time_ms()
        server.stop(kill=True)
        server.start()
        wait_for(lambda: _done(nova, job) >= 10, timeout_s=60, message="10 tasks done")
        before_long_ms = nova.server_time_ms()
        server.stop(kill=True)
        time.sleep(2.5 * LEASE_TTL_S)  # the fault: Redis down longer than the lease TTL
        assert all(p.proc.poll() is None for p in fleet.procs), fleet.logs()
        server.start()
        wait_for(lambda: nova.job(job, with_tasks=False).finished, timeout_s=90,
                 message="job to finish after the restarts")
        stop_cleanly(fleet.procs)
        logs = "".join(p.output() for p in fleet.procs)  # whole logs: not only their tails
        assert "Redis unavailable" in logs or "heartbeat failed" in logs, fleet.logs()
        verdict = check(nova, [job], store=open_store(fleet.store_url), expect="done")
        assert not invariants(nova, [job])
        record(7, verdict, started)
        # the long outage's grace: after the second kill, opened by a silence of at least
        # the outage (the last tick was at or before the kill)
        graces = [e for e in nova.events(count=1_000_000) if e.type == "grace"]
        assert any(e.ts_ms >= before_long_ms
                   and int(e.fields["gap_ms"]) >= 2.5 * LEASE_TTL_S * 1000
                   for e in graces), graces
        assert _false_expiries(nova, before_short_ms) == []
    finally:
        fleet.close()
        nova.close()


def test_script_flush_mid_run(private_redis, namespace, tmp_path, record):
    """Scenario 12a: SCRIPT FLUSH ten times while two workers run a job: register_script
    reloads on NOSCRIPT, nothing fails."""
    started = time.monotonic()
    server = private_redis()
    nova = chaos_client(server.url, namespace)
    job = nova.enqueue("synthetic", [TaskSpec(f"flush {i}", 0.1) for i in range(24)],
                       params={"seconds": 0.1, "size": 64})
    fleet = _fleet(server, namespace, tmp_path)
    try:
        wait_for(lambda: _done(nova, job) >= 2, timeout_s=60, message="2 tasks done")
        flushes = 0
        while flushes < 10 and not nova.job(job, with_tasks=False).finished:
            nova.redis.script_flush()
            flushes += 1
            done = _done(nova, job)
            wait_for(lambda d=done: _done(nova, job) > d or nova.job(job, with_tasks=False).finished,
                     timeout_s=30, message="progress after SCRIPT FLUSH")
        wait_for(lambda: nova.job(job, with_tasks=False).finished, timeout_s=60,
                 message="job to finish")
        stop_cleanly(fleet.procs)
        assert flushes >= 3
        verdict = check(nova, [job], store=open_store(fleet.store_url), expect="done")
        assert not invariants(nova, [job])
        record(12, verdict, started)
        assert not [e for e in nova.events(count=100_000) if e.type in ("requeued", "failed")]
    finally:
        fleet.close()
        nova.close()


def test_maxmemory_noeviction_gives_clear_errors_and_no_corruption(private_redis, namespace,
                                                                  tmp_path, record):
    """Scenario 12b: Redis at maxmemory with noeviction refuses every script's first write,
    so a script fails whole (no half-written state). Clients see OutOfMemoryError, workers
    back off; once memory is raised the job finishes and every invariant holds."""
    started = time.monotonic()
    server = private_redis("--maxmemory-policy", "noeviction")
    nova = chaos_client(server.url, namespace)
    job = nova.enqueue("synthetic", [TaskSpec(f"oom {i}", 0.1) for i in range(20)],
                       params={"seconds": 0.1, "size": 64})
    fleet = _fleet(server, namespace, tmp_path)
    try:
        wait_for(lambda: _done(nova, job) >= 3, timeout_s=60, message="3 tasks done")
        used = int(nova.redis.info("memory")["used_memory"])
        nova.redis.config_set("maxmemory", str(used // 2))
        with pytest.raises(redis.exceptions.OutOfMemoryError, match="maxmemory"):
            nova.enqueue("synthetic", [TaskSpec("refused", 0.1)], job_id="refused-job")
        assert not nova.redis.exists(nova.keys.job("refused-job"))  # nothing half-written
        frozen_done = _done(nova, job)
        wait_for(lambda: any("maxmemory" in p.output() for p in fleet.procs), timeout_s=30,
                 message="workers to report the OOM error")
        assert _done(nova, job) <= frozen_done + 2  # commits in flight may not land either
        assert not invariants(nova, [job])  # consistent while refusing writes
        assert all(p.proc.poll() is None for p in fleet.procs), fleet.logs()
        nova.redis.config_set("maxmemory", "0")
        wait_for(lambda: nova.job(job, with_tasks=False).finished, timeout_s=90,
                 message="job to finish once memory is raised")
        stop_cleanly(fleet.procs)
        verdict = check(nova, [job], store=open_store(fleet.store_url), expect="done")
        assert not invariants(nova, [job])
        record(12, verdict, started)
    finally:
        fleet.close()
        nova.close()


def test_outage_shorter_than_the_gap_keeps_on_schedule_holders(redis_url, namespace):
    """Seeded at the script level: Redis was silent for just under the gap; the holder's
    last renewal came one heartbeat before the silence (its next one fell into it)."""
    from nova_queue.errors import ConfigError

    try:
        nova = chaos_client(redis_url, namespace, lease_ttl_s=1.0, heartbeat_interval_s=0.5)
    except ConfigError:
        return  # fixed by refusing such settings: nothing left to show
    ttl, hb, gap = (nova.settings.lease_ttl_ms, nova.settings.heartbeat_interval_ms,
                    nova.worker.gap_ms)
    job = nova.enqueue("synthetic", [TaskSpec("held", 1.0)])
    nova.register_worker("holder", {"name": "holder"}, ["synthetic"])
    nova.register_worker("other", {"name": "other"}, ["synthetic"])
    lease = nova.claim("holder", "synthetic").leases[0]
    now = nova.server_time_ms()
    silence_start = now - (gap - 100)  # no script ran since: Redis was down
    deadline = silence_start - (hb - 50) + ttl  # renewed on schedule before the outage
    k = nova.keys
    nova.redis.hset(k.meta(), "last_tick_ms", silence_start)
    nova.redis.zadd(k.leases(), {lease.task_id: deadline})
    nova.redis.hset(k.task(lease.task_id), "deadline_ms", deadline)
    nova.redis.zadd(k.alive(), {"holder": deadline})
    nova.claim("other", "synthetic")  # the first script once Redis is back
    renewed = nova.renew("holder", [lease])  # the holder's first renewal after the outage
    assert (renewed.worker_lost, renewed.lost) == (False, [])
    assert nova.task(lease.task_id).lease_gen == 1 and job
