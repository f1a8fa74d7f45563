"""Scenario 11: replies lost after the script ran (a proxy drops the answer and cuts the
connection). redis-py's Retry (connection.py) resends the same EVALSHA; the worker retries
commits itself. Every retry must be idempotent."""

from __future__ import annotations

import hashlib
import signal
import time
import urllib.parse

import pytest
from novatests import seed
from novatests.chaos.fleet import chaos_client, no_tracebacks
from novatests.chaos.history import Accepted, check, invariants
from novatests.chaos.proxy import CutProxy

from nova_queue import TaskSpec
from nova_queue.client import BatchCommit
from nova_queue.errors import StaleResultError
from nova_queue.keys import result_key
from nova_queue.local import wait_for
from nova_queue.scripts import script_sources
from nova_queue.stores import open_store

#: run time of the batched commits: as fast as the seeded speed, so that claims grant k tasks
BATCH_RUN_S = 0.0001


def _key(lease) -> str:
    return result_key(lease.job_id, lease.index, lease.lease_gen, lease.attempt_id, "png")


def sha(command: str) -> bytes:
    """The SHA-1 redis-py's register_script sends for a command's script."""
    return hashlib.sha1(script_sources()[command][1].encode()).hexdigest().encode()


def preload(client) -> None:
    """Load every script first, so the first EVALSHA runs instead of answering NOSCRIPT."""
    for _, source in script_sources().values():
        client.redis.script_load(source)


@pytest.fixture
def proxied(redis_url, namespace):
    """(direct client, client through the proxy, proxy)."""
    proxy = CutProxy(urllib.parse.urlsplit(redis_url).port)
    direct, via = chaos_client(redis_url, namespace), chaos_client(proxy.url, namespace)
    preload(direct)
    yield direct, via, proxy
    via.close(), direct.close()
    proxy.close()


def test_lost_replies_of_claim_complete_and_fail_are_idempotent(proxied, record):
    """The same claim returns the same leases; the same commit answers ALREADY; the same
    failure report burns one attempt, not two."""
    started = time.monotonic()
    direct, via, proxy = proxied
    runs = 8
    job = direct.enqueue("synthetic", [TaskSpec(f"lost {i}", 0.01) for i in range(2 * runs)],
                         max_attempts=100)
    via.register_worker("w", {"name": "w"}, ["synthetic"])
    accepted: list[Accepted] = []
    cuts = 0
    for _ in range(runs):
        proxy.arm(sha("claim"))
        leases = via.claim("w", "synthetic", k=2).leases
        cuts += 1
        assert proxy.cuts == cuts and leases
        for lease in leases:  # what the retry returned is the lease Redis holds
            t = direct.task(lease.task_id)
            assert (t.state, t.worker_id, t.lease_gen, t.attempt_id) == \
                ("leased", "w", lease.lease_gen, lease.attempt_id)
        done, rest = leases[0], leases[1:]
        key = _key(done)
        proxy.arm(sha("complete"))
        assert via.complete("w", done, key, run_s=0.01, warm=True).replayed
        cuts += 1
        assert proxy.cuts == cuts
        accepted.append(Accepted(done.task_id, "w", done.lease_gen, done.attempt_id, key))
        for lease in rest:
            proxy.arm(sha("fail"))
            # the resent report finds the task already requeued: refused as not leased
            with pytest.raises(StaleResultError, match="not leased"):
                via.fail("w", lease, "error", "boom")
            cuts += 1
            t = direct.task(lease.task_id)
            # the attempt was used once, not twice
            assert (proxy.cuts, t.state, t.attempt_count) == (cuts, "pending", lease.attempt)
    deadline = time.monotonic() + 30
    while not direct.job(job, with_tasks=False).finished:  # finish the rest, no faults
        assert time.monotonic() < deadline, "draining the job took too long"
        for lease in direct.claim("w", "synthetic", k=4).leases:
            key = _key(lease)
            direct.complete("w", lease, key, run_s=0.01, warm=True)
            accepted.append(Accepted(lease.task_id, "w", lease.lease_gen, lease.attempt_id, key))
    verdict = check(direct, [job], accepted=accepted, expect="done")
    assert not invariants(direct, [job])
    record(11, verdict, started, runs=runs)
    claimed = [e for e in direct.events(count=100_000) if e.type == "claimed"]
    assert len(claimed) == len({(e.fields["task"], e.fields["lease_gen"]) for e in claimed})
    assert verdict.commits == 2 * runs and cuts > 2 * runs


def test_lost_replies_of_complete_and_claim_are_idempotent(proxied, record):
    """The resent commit-and-claim answers ALREADY and returns the leases the first call
    made: no second lease, no second commit."""
    started = time.monotonic()
    direct, via, proxy = proxied
    job = direct.enqueue("synthetic", [TaskSpec(f"cc {i}", 0.01) for i in range(5)])
    via.register_worker("w", {"name": "w"}, ["synthetic"])
    accepted: list[Accepted] = []
    lease = via.claim("w", "synthetic").leases[0]
    for cut in range(1, 5):
        key = _key(lease)
        proxy.arm(sha("complete_claim"))
        done, nxt = via.complete_and_claim("w", lease, key, run_s=0.01, warm=True)
        assert done.replayed and proxy.cuts == cut
        accepted.append(Accepted(lease.task_id, "w", lease.lease_gen, lease.attempt_id, key))
        (lease,) = nxt.leases
        t = direct.task(lease.task_id)  # the lease the retry returned is the one Redis holds
        assert (t.state, t.worker_id, t.lease_gen, t.attempt_id) == \
            ("leased", "w", lease.lease_gen, lease.attempt_id)
    key = _key(lease)
    done, nxt = direct.complete_and_claim("w", lease, key, run_s=0.01, warm=True)
    accepted.append(Accepted(lease.task_id, "w", lease.lease_gen, lease.attempt_id, key))
    assert done.job_finished and nxt.status == "empty"
    verdict = check(direct, [job], accepted=accepted, expect="done")
    assert verdict.commits == 5 and not invariants(direct, [job])
    claimed = [e for e in direct.events(count=10_000) if e.type == "claimed"]
    assert len(claimed) == 5 == len({(e.fields["task"], e.fields["lease_gen"]) for e in claimed})
    record(11, verdict, started, runs=4)


def test_lost_replies_of_a_batched_commit_answer_the_same(proxied, record):
    """complete_batch with a stale lease in the middle: the resent call answers ALREADY for
    the commits that held, stale again for the other, and returns the leases the first
    call claimed; the checker sees each task committed once and every transition."""
    started = time.monotonic()
    direct, via, proxy = proxied
    job = direct.enqueue("synthetic", [TaskSpec(f"b {i}", 0.01) for i in range(40)])
    for wid in ("w", "w2"):
        via.register_worker(wid, {"name": wid}, ["synthetic"])
        seed.set_speed(direct, wid, "synthetic", 0.01)  # measured: claims grant k tasks
    accepted: list[Accepted] = []
    leases = via.claim("w", "synthetic", 4).leases
    for cut in range(1, 4):
        assert len(leases) == 4
        seed.expire_lease(direct, leases[1].task_id)
        [taken] = direct.claim("w2", "synthetic").leases  # w's second lease is stale now
        commits = [BatchCommit(x, _key(x), BATCH_RUN_S, True) for x in leases]
        proxy.arm(sha("complete_batch"))
        res = via.complete_batch("w", commits, app="synthetic", k=4)
        assert proxy.cuts == cut
        assert [getattr(r, "replayed", None) for r in res.results] == [True, None, True, True]
        assert isinstance(res.results[1], StaleResultError)
        accepted += [Accepted(x.task_id, "w", x.lease_gen, x.attempt_id, _key(x))
                     for i, x in enumerate(leases) if i != 1]
        direct.complete("w2", taken, _key(taken), run_s=BATCH_RUN_S, warm=True)
        accepted.append(Accepted(taken.task_id, "w2", taken.lease_gen, taken.attempt_id,
                                 _key(taken)))
        leases = res.claimed.leases
        for x in leases:  # the leases the retry returned are the ones Redis holds
            t = direct.task(x.task_id)
            assert (t.state, t.worker_id, t.lease_gen, t.attempt_id) == \
                ("leased", "w", x.lease_gen, x.attempt_id)
    res = direct.complete_batch("w", [BatchCommit(x, _key(x), BATCH_RUN_S, True) for x in leases])
    accepted += [Accepted(x.task_id, "w", x.lease_gen, x.attempt_id, _key(x)) for x in leases]
    assert res.committed == 4
    direct.cancel(job)  # the tasks never claimed end as cancelled
    verdict = check(direct, [job], accepted=accepted)
    assert verdict.commits == 16 and not invariants(direct, [job])
    record(11, verdict, started, runs=3)


@pytest.mark.slow
def test_worker_commit_retry_after_a_lost_reply_and_an_outage(proxied, fleet, record):
    """A real worker: its commit's reply is lost and the proxy stays down longer than
    redis-py's own retries; the worker's commit loop retries and gets ALREADY."""
    started = time.monotonic()
    direct, _, proxy = proxied
    job = direct.enqueue("synthetic", [TaskSpec(f"w {i}", 0.05) for i in range(6)],
                         params={"seconds": 0.05, "size": 64})
    # the worker commits with complete_claim (its commit also claims the next task)
    proxy.arm(sha("complete_claim"), down_s=1.5)
    w = fleet.start("w", "--no-benchmark", redis_url=proxy.url)
    wait_for(lambda: direct.job(job, with_tasks=False).finished, timeout_s=60,
             message="job to finish")
    w.signal(signal.SIGTERM)
    assert w.wait(30) == 0
    no_tracebacks([w])
    assert proxy.cuts == 1 and proxy.refused >= 1
    assert "retrying" in w.output()
    verdict = check(direct, [job], store=open_store(fleet.store_url), expect="done")
    assert not invariants(direct, [job])
    record(11, verdict, started)


@pytest.mark.slow
def test_worker_claim_after_a_lost_reply_and_an_outage_keeps_its_lease(redis_url, namespace,
                                                                     tmp_path):
    from novatests.chaos.fleet import Fleet

    proxy = CutProxy(urllib.parse.urlsplit(redis_url).port)
    direct = chaos_client(redis_url, namespace, lease_ttl_s=6.0, heartbeat_interval_s=1.5)
    fleet = Fleet(redis_url, namespace, (tmp_path / "store").as_uri(), tmp_path / "homes")
    try:
        preload(direct)
        job = direct.enqueue("synthetic", [TaskSpec("one", 0.05)], params={"seconds": 0.05})
        proxy.arm(sha("claim"), down_s=1.0)
        fleet.start("w", "--no-benchmark", redis_url=proxy.url,
                        env={"NOVA_LEASE_TTL_S": "6", "NOVA_HEARTBEAT_INTERVAL_S": "1.5"})
        wait_for(lambda: direct.job(job, with_tasks=False).finished, timeout_s=60,
                 message="job to finish")
        assert proxy.cuts == 1
        t = direct.task(f"{job}:0")
        expired = [e for e in direct.events(count=10_000)
                   if e.type == "requeued" and e.fields.get("kind") == "expired"]
        assert (t.attempt_count, t.lease_gen, expired) == (1, 1, [])
    finally:
        fleet.close(), direct.close(), proxy.close()
