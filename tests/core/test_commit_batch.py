"""complete_batch-12: up to 64 commits of one worker in one call, each fenced on its own,
then the next claim; idempotent retries; the same state and events as one complete per
task."""

import pytest
from novatests.leases import events, join, rkey, setup_job, task_hash, worker_hash
from novatests.seed import expire_lease, set_speed

from nova_queue import NovaClient
from nova_queue.client import BatchCommit
from nova_queue.errors import InputError, JobCancelledError, StaleResultError
from nova_queue.models import CompleteResult


def fast(nova, wid):
    """Register ``wid`` with a measured speed (5 samples): its claims get k tasks."""
    join(nova, wid)
    set_speed(nova, wid, "synthetic", 0.01)


def batch(leases, run_s=0.1, warm=True):
    return [BatchCommit(x, rkey(x), run_s, warm, {"i": x.index}) for x in leases]


def test_batch_commits_each_and_claims_the_next_in_one_call(nova):
    job = setup_job(nova, 10)
    fast(nova, "w1")
    first = nova.claim("w1", "synthetic", 4).leases
    res = nova.complete_batch("w1", batch(first), app="synthetic", k=3)
    assert [type(r) for r in res.results] == [CompleteResult] * 4 and res.committed == 4
    assert res.claimed.status == "ok" and [x.index for x in res.claimed.leases] == [4, 5, 6]
    st = nova.job(job, with_tasks=False)
    assert (st.done, st.leased, st.pending) == (4, 3, 3)
    assert nova.redis.hget(nova.keys.inflight(), "synthetic") == "3"
    held = {x.task_id for x in res.claimed.leases}
    assert nova.redis.smembers(nova.keys.held("w1")) == held
    assert set(nova.redis.zrange(nova.keys.leases(), 0, -1)) == held
    assert task_hash(nova, first[2].task_id)["meta"] == '{"i": 2}'
    # every transition still has its own event, in order
    kinds = [(e.type, e.fields["task"]) for e in events(nova, "claimed", "completed")]
    assert kinds == [*(("claimed", str(i)) for i in range(4)),
                     *(("completed", str(i)) for i in range(4)),
                     *(("claimed", str(i)) for i in range(4, 7))]
    h = worker_hash(nova, "w1")
    assert (h["tasks_done"], h["done:synthetic"], h["n:synthetic"]) == ("4", "4", "9")
    assert h["state"] == "busy"


def test_a_stale_lease_in_the_middle_of_a_batch_is_rejected_alone(nova):
    job = setup_job(nova, 40)
    fast(nova, "w1")
    fast(nova, "w2")
    leases = nova.claim("w1", "synthetic", 3).leases
    assert len(leases) == 3
    expire_lease(nova, leases[1].task_id)
    [taken] = nova.claim("w2", "synthetic").leases  # reaps w1's lapsed lease, leases it anew
    assert taken.task_id == leases[1].task_id
    before = task_hash(nova, taken.task_id)
    res = nova.complete_batch("w1", batch(leases))
    assert isinstance(res.results[0], CompleteResult) and isinstance(res.results[2], CompleteResult)
    assert isinstance(res.results[1], StaleResultError) and res.claimed is None
    assert task_hash(nova, taken.task_id) == before  # w2's lease is untouched
    st = nova.job(job, with_tasks=False)
    assert (st.done, st.leased, st.pending, st.state) == (2, 1, 37, "running")
    assert [e.fields["task"] for e in events(nova, "stale_rejected")] == ["1"]
    assert nova.redis.smembers(nova.keys.held("w1")) == set()
    assert nova.redis.zrange(nova.keys.leases(), 0, -1) == [taken.task_id]
    assert worker_hash(nova, "w1")["tasks_done"] == "2"


def test_a_batch_retried_after_a_lost_reply_answers_the_same(nova):
    job = setup_job(nova, 40)
    fast(nova, "w1")
    fast(nova, "w2")
    leases = nova.claim("w1", "synthetic", 3).leases
    assert len(leases) == 3
    expire_lease(nova, leases[0].task_id)
    nova.claim("w2", "synthetic")  # w1's first lease is stale from now on
    ids = ["again-1", "again-2"]
    res = nova.complete_batch("w1", batch(leases), app="synthetic", k=2, attempt_ids=ids)
    counts = (nova.job(job, with_tasks=False).done, worker_hash(nova, "w1")["tasks_done"],
              nova.redis.hget(nova.keys.inflight(), "synthetic"))
    again = nova.complete_batch("w1", batch(leases), app="synthetic", k=2, attempt_ids=ids)
    assert isinstance(res.results[0], StaleResultError)
    assert isinstance(again.results[0], StaleResultError)
    assert [r.replayed for r in res.results[1:]] == [False, False]
    assert [r.replayed for r in again.results[1:]] == [True, True]
    assert ({(x.task_id, x.lease_gen, x.attempt_id) for x in again.claimed.leases}
            == {(x.task_id, x.lease_gen, x.attempt_id) for x in res.claimed.leases})
    assert (nova.job(job, with_tasks=False).done, worker_hash(nova, "w1")["tasks_done"],
            nova.redis.hget(nova.keys.inflight(), "synthetic")) == counts == (2, "2", "3")
    assert len(res.claimed.leases) == 2 and len(events(nova, "completed")) == 2


def test_the_batch_that_ends_a_job_finishes_it_once(nova):
    job = setup_job(nova, 3)
    fast(nova, "w1")
    leases = nova.claim("w1", "synthetic", 3).leases
    res = nova.complete_batch("w1", batch(leases), app="synthetic", k=1)
    assert [r.job_finished for r in res.results] == [False, False, True]
    assert res.claimed.status == "empty"
    assert nova.job(job, with_tasks=False).state == "done"
    assert [e.fields["done"] for e in events(nova, "job_finished")] == ["3"]
    assert nova.redis.zscore(nova.keys.finished(), job) is not None
    assert worker_hash(nova, "w1")["state"] == "idle"


def test_a_cancelled_jobs_commit_in_a_batch_is_refused_and_the_others_hold(nova):
    kept, cancelled = setup_job(nova, 2), setup_job(nova, 2)
    fast(nova, "w1")
    leases = nova.claim("w1", "synthetic", 4).leases
    nova.cancel(cancelled)
    res = nova.complete_batch("w1", batch(leases))
    by_job = {(x.job_id, type(r)) for x, r in zip(leases, res.results)}
    assert by_job == {(kept, CompleteResult), (cancelled, JobCancelledError)}
    assert nova.job(kept, with_tasks=False).state == "done"
    assert nova.job(cancelled, with_tasks=False).state == "cancelled"
    assert nova.redis.hget(nova.keys.inflight(), "synthetic") == "0"
    assert nova.redis.scard(nova.keys.held("w1")) == 0


@pytest.mark.parametrize("forge", ["result_key", "run_s", "task_id"])
def test_a_malformed_commit_refuses_the_whole_batch_before_writing(nova, forge):
    import dataclasses

    setup_job(nova, 3)
    fast(nova, "w1")
    leases = nova.claim("w1", "synthetic", 3).leases
    commits = batch(leases)
    if forge == "result_key":
        commits[2] = dataclasses.replace(commits[2], result_key="jobs/x/results/evil.png")
    elif forge == "task_id":
        commits[2] = dataclasses.replace(commits[2], lease=dataclasses.replace(
            leases[2], task_id="x}:evil:1"))
    before = {x.task_id: task_hash(nova, x.task_id) for x in leases}
    if forge == "run_s":
        run = nova.caller.run  # the client checks run_s itself; send the script a bad one
        nova.caller.run = lambda name, keys, a: run(name, keys, [*a[:11], "-1", *a[12:]])
    with pytest.raises(InputError):
        nova.complete_batch("w1", commits)
    assert {x.task_id: task_hash(nova, x.task_id) for x in leases} == before


def test_a_batch_leaves_the_same_state_as_one_complete_per_task(nova, redis_url, namespace):
    """Warm and cold runs over two jobs: tasks, jobs, the worker's record and the events
    match those of single commits in another namespace."""
    other = NovaClient.from_url(redis_url, namespace=namespace + "-single")
    try:
        runs = [(0.5, False), (1.0, True), (2.0, True), (0.25, True)]
        shapes = []
        for client, batched in ((nova, True), (other, False)):
            jobs = [setup_job(client, 2, cost=2.0), setup_job(client, 2)]
            fast(client, "w1")
            leases = client.claim("w1", "synthetic", 4).leases
            commits = [BatchCommit(x, rkey(x), s, w) for x, (s, w) in zip(leases, runs)]
            if batched:
                client.complete_batch("w1", commits)
            else:
                for c in commits:
                    client.complete("w1", c.lease, c.result_key, run_s=c.run_s, warm=c.warm)
            shapes.append(_shape(client, jobs, leases))
        assert shapes[0] == shapes[1]
    finally:
        other.redis.delete(*other.redis.keys(f"{other.prefix}*"))
        other.close()


def _shape(client, jobs, leases):
    """What a commit writes, without ids and times."""
    timeless = {"finished_ms", "claimed_ms", "deadline_ms", "run_deadline_ms", "started_ms",
                "created_ms", "last_done_ms", "busy_until_ms", "last_seen_ms", "registered_ms"}

    def clean(h):
        return {k: v for k, v in h.items() if k not in timeless and not k.endswith("_ms")
                and k not in ("result", "attempt_id", "id", "last_claim", "params")}

    w = clean(worker_hash(client, "w1"))
    w = {k: (round(float(v), 6) if k.startswith("ema:") else v) for k, v in w.items()}
    return ([clean(task_hash(client, x.task_id)) for x in leases],
            [clean(client.redis.hgetall(client.keys.job(j))) for j in jobs], w,
            [(e.type, _timeless_fields(e, jobs, timeless)) for e in events(client)],
            client.redis.zscore(client.keys.app_fleet("synthetic"), "w1"))


def _timeless_fields(event, jobs, timeless):
    """An event's fields without times and ids: job ids as their place in ``jobs``, the
    result key's own attempt id left out."""
    f = {k: v for k, v in event.fields.items() if k not in timeless and k != "result"}
    if "job" in f:
        f["job"] = str(jobs.index(f["job"])) if f["job"] in jobs else "other"
    return f


def test_a_backup_attempt_commits_in_a_batch_and_the_first_attempt_is_then_stale(nova):
    """The batch reads a task's backup fields only when it has a backup, and its result
    only when it is done (a replay): both paths through complete_batch."""
    job = setup_job(nova, 2)
    fast(nova, "w3")
    firsts = nova.claim("w3", "synthetic", 2).leases
    assert len(firsts) == 2
    fast(nova, "w4")
    for lease in firsts:  # long overdue: an idle worker backs them up
        nova.redis.hset(nova.keys.task(lease.task_id), "claimed_ms", 1)
    backup = nova.claim("w4", "synthetic").leases[0]
    assert backup.backup and backup.task_id == firsts[0].task_id
    won = nova.complete_batch("w4", batch([backup]))
    assert isinstance(won.results[0], CompleteResult) and not won.results[0].replayed
    assert [e.fields["worker"] for e in events(nova, "backup_won")] == ["w4"]
    again = nova.complete_batch("w4", batch([backup]))  # its reply lost: the same answer
    assert isinstance(again.results[0], CompleteResult) and again.results[0].replayed
    late = nova.complete_batch("w3", batch(firsts))
    assert isinstance(late.results[0], StaleResultError)
    assert isinstance(late.results[1], CompleteResult)
    assert task_hash(nova, backup.task_id)["result"] == rkey(backup)
    assert nova.job(job, with_tasks=False).state == "done"
    assert [e.fields["task"] for e in events(nova, "completed")] == ["0", "1"]


def test_a_commits_meta_json_is_reused_only_where_it_cannot_differ():
    """Metas of text are alike across a batch and their JSON is reused; 1, 1.0 and True
    are equal as cache keys but not as JSON, so metas with other values are always encoded."""
    import json

    from nova_queue.client.batch import _meta_json

    meta = {"backend": "cpu", "worker": "w", "bytes": "2"}
    assert _meta_json(meta) == json.dumps(meta) and _meta_json(dict(meta)) == json.dumps(meta)
    assert [_meta_json({"x": v}) for v in (1, True, 1.0)] == ['{"x": 1}', '{"x": true}',
                                                              '{"x": 1.0}']
    assert _meta_json({"verify": {"cand": "agree"}}) == '{"verify": {"cand": "agree"}}'
    assert _meta_json({}) == "{}"
