"""Small results held in Redis (``nova_queue/results.py``): the commit writes them, fenced
like the rest of it; readers find them by result key before the store; purge and retention
delete them with their task; nothing a caller sends past the cap is kept."""

from __future__ import annotations

import pytest
from novatests.leases import join, rkey, setup_job
from novatests.seed import expire_lease, set_speed

from nova_queue import limits
from nova_queue.client.batch import BatchCommit
from nova_queue.errors import InputError, ObjectNotFoundError, StaleResultError
from nova_queue.results import Results, task_of
from nova_queue.stores import open_store

BINARY = bytes(range(256)) * 3  # not UTF-8: the bytes must come back as sent


def fast(nova, wid):
    """Register ``wid`` with a measured speed: its claims get k tasks."""
    join(nova, wid)
    set_speed(nova, wid, "synthetic", 0.01)


@pytest.fixture
def results(nova, tmp_path):
    return Results(nova.redis, nova.keys, open_store(tmp_path.as_uri()))


def test_a_commit_holds_a_small_result_and_readers_find_it_by_key(nova, results):
    setup_job(nova, 2)
    join(nova, "w1")
    lease = nova.claim("w1", "synthetic").leases[0]
    res = nova.complete("w1", lease, rkey(lease), run_s=0.5, warm=True, inline=BINARY,
                        meta={"content_type": "application/x-test"})
    assert not res.replayed
    assert nova.task(lease.task_id).result == rkey(lease)  # the task names its key as ever
    obj = results.get(rkey(lease))
    assert (obj.data, obj.content_type) == (BINARY, "application/x-test")
    assert obj.metadata["held"] == "inline (Redis)" and obj.metadata["task"] == lease.task_id
    info = results.head(rkey(lease))
    assert (info.size, info.content_type) == (len(BINARY), "application/x-test")
    assert results.presign(rkey(lease)) is None  # served by the caller, not a store URL
    assert list(results.store.list("jobs/")) == []  # nothing went to the store
    # a replay (its reply was lost) keeps the first write
    again = nova.complete("w1", lease, rkey(lease), run_s=0.5, warm=True, inline=b"other")
    assert again.replayed and results.get(rkey(lease)).data == BINARY


def test_a_key_that_is_not_the_tasks_own_result_is_the_stores(nova, results):
    setup_job(nova, 1)
    join(nova, "w1")
    lease = nova.claim("w1", "synthetic").leases[0]
    nova.complete("w1", lease, rkey(lease), run_s=0.5, warm=True, inline=b"mine")
    other = rkey(lease).replace(f"-g{lease.lease_gen}-", f"-g{lease.lease_gen + 1}-")
    with pytest.raises(ObjectNotFoundError):
        results.get(other)  # another attempt's key: looked up in the store, which has none
    assert results.head("jobs/x/manifest.json") is None  # not a result key at all
    assert task_of(rkey(lease)) == lease.task_id and task_of("jobs/x/manifest.json") is None


def test_a_stale_commit_writes_no_inline_result(nova, results):
    setup_job(nova, 1)
    join(nova, "w1")
    join(nova, "w2")
    old = nova.claim("w1", "synthetic").leases[0]
    expire_lease(nova, old.task_id)
    new = nova.claim("w2", "synthetic").leases[0]
    nova.complete("w2", new, rkey(new), run_s=0.5, warm=True, inline=b"newer")
    with pytest.raises(StaleResultError):
        nova.complete("w1", old, rkey(old), run_s=0.5, warm=True, inline=b"stale")
    assert results.get(rkey(new)).data == b"newer"
    with pytest.raises(ObjectNotFoundError):
        results.get(rkey(old))
    assert nova.redis.hget(nova.keys.inline(old.task_id), "data") == "newer"


def test_batched_and_combined_commits_carry_inline_results(nova, results):
    setup_job(nova, 6)
    fast(nova, "w1")
    leases = nova.claim("w1", "synthetic", 3).leases
    commits = [BatchCommit(x, rkey(x), 0.1, True, {}, f"r{x.index}".encode()) for x in leases]
    commits[1] = BatchCommit(leases[1], rkey(leases[1]), 0.1, True, {})  # this one: the store
    res = nova.complete_batch("w1", commits, app="synthetic", k=1)
    assert res.committed == 3
    assert results.get(rkey(leases[0])).data == b"r0" and results.get(rkey(leases[2])).data == b"r2"
    assert nova.redis.exists(nova.keys.inline(leases[1].task_id)) == 0
    [nxt] = res.claimed.leases
    _, again = nova.complete_and_claim("w1", nxt, rkey(nxt), run_s=0.1, warm=True,
                                       inline=b"combined")
    assert results.get(rkey(nxt)).data == b"combined" and again.status == "ok"


def test_an_inline_result_past_the_cap_is_refused_and_nothing_is_written(nova):
    setup_job(nova, 1)
    join(nova, "w1")
    lease = nova.claim("w1", "synthetic").leases[0]
    big = b"x" * (limits.MAX_INLINE_BYTES + 1)
    with pytest.raises(InputError, match="inline result"):
        nova.complete("w1", lease, rkey(lease), run_s=0.5, warm=True, inline=big)
    # a caller without the client's check (any EVALSHA caller) is refused by the script
    keys = [nova.keys.task(lease.task_id), nova.keys.job(lease.job_id),
            *nova.worker.commit_keys("w1", "synthetic")]
    args = [nova.prefix, "w1", lease.task_id, lease.lease_gen, lease.attempt_id, rkey(lease),
            "0.5", "1", "0.3", "1000", "{}", 3, 300_000, big]
    code, why = nova.scripts.call("complete", keys, args)
    assert code == -9 and "inline result" in why
    args[-1:] = []  # an older client's arity (no inline argument): refused, not misread
    code, why = nova.scripts.call("complete", keys, args)
    assert code == -9
    assert nova.task(lease.task_id).state == "leased"
    assert nova.redis.exists(nova.keys.inline(lease.task_id)) == 0


def test_purge_deletes_inline_results_with_their_tasks(nova):
    job = setup_job(nova, 3)
    fast(nova, "w1")
    for lease in nova.claim("w1", "synthetic", 3).leases:
        nova.complete("w1", lease, rkey(lease), run_s=0.1, warm=True, inline=b"ok")
    assert len(nova.redis.keys(nova.keys.prefix + "inline:*")) == 3
    nova.purge(job)
    assert nova.redis.keys(nova.keys.prefix + "inline:*") == []
