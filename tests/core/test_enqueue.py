"""enqueue-9 and abort-4 against a real Redis: atomic jobs, chunking, rejection."""

import json

import pytest

from nova_queue import TaskSpec
from nova_queue.errors import InputError, JobExistsError, JobNotFoundError


def specs(n, cost=1.0):
    return [TaskSpec(f"prompt {i}", cost) for i in range(n)]


def ns_keys(nova):
    return sorted(nova.redis.scan_iter(match=nova.prefix + "*"))


def raw_job(nova, job, total):
    """enqueue-9's KEYS for a synthetic ``job`` and its fields (``total`` tasks), to call the
    script chunk by chunk as the client does (the KEYS order written out: it is the contract)."""
    k = nova.keys
    keys = [k.job(job), k.jobs(), k.staging(), k.stage(job), k.pending("synthetic"), k.seq(),
            k.events(), k.apps(), k.meta()]
    meta = json.dumps({"app": "synthetic", "params": "{}", "priority": 0, "max_attempts": 3,
                       "total": total, "name": ""})
    return keys, meta


def test_enqueue_creates_job_tasks_and_event(nova):
    job = nova.enqueue("synthetic", specs(3), params={"seconds": 0.5}, priority=5, name="x")
    st = nova.job(job)
    assert (st.state, st.total, st.pending, st.app, st.priority) == ("queued", 3, 3, "synthetic", 5)
    assert st.params == {"seconds": 0.5}
    assert [t.input for t in st.tasks] == ["prompt 0", "prompt 1", "prompt 2"]
    assert all(t.state == "pending" and t.lease_gen == 0 for t in st.tasks)
    assert nova.redis.zrange(nova.keys.pending("synthetic"), 0, -1) == [f"{job}:{i}" for i in range(3)]
    ev = nova.events()
    assert [e.type for e in ev] == ["enqueued"] and ev[0].fields["job"] == job
    assert [j.job_id for j in nova.jobs()] == [job]


def test_pending_order_is_priority_then_fifo(nova):
    low = nova.enqueue("synthetic", specs(2), priority=-1)
    normal = nova.enqueue("synthetic", specs(2))
    high = nova.enqueue("synthetic", specs(2), priority=10)
    order = nova.redis.zrange(nova.keys.pending("synthetic"), 0, -1)
    assert order == [f"{high}:0", f"{high}:1", f"{normal}:0", f"{normal}:1", f"{low}:0", f"{low}:1"]


def test_large_job_is_staged_in_chunks_and_published_at_once(nova):
    job = nova.enqueue("synthetic", specs(2500), chunk_size=1000)
    st = nova.job(job, with_tasks=False)
    assert (st.state, st.total, st.pending) == ("queued", 2500, 2500)
    assert nova.redis.zcard(nova.keys.pending("synthetic")) == 2500
    assert not nova.redis.exists(nova.keys.stage(job))
    assert nova.redis.zcard(nova.keys.staging()) == 0
    first = nova.redis.zrange(nova.keys.pending("synthetic"), 0, 0)
    assert first == [f"{job}:0"]


def test_staging_job_is_invisible_until_published(nova):
    k = nova.keys
    job = "stagedjob"
    keys, meta = raw_job(nova, job, total=4)
    code, _, _ = nova.scripts.call("enqueue", keys, [nova.prefix, job, 1, 0, meta, 0, 1000,
                                                     "a", "1", "b", "1"])
    assert code == 0
    assert nova.redis.zcard(k.pending("synthetic")) == 0
    with pytest.raises(JobNotFoundError):
        nova.job(job)
    assert nova.jobs() == []
    # publishing with tasks missing is refused
    code, detail = nova.scripts.call("enqueue", keys, [nova.prefix, job, 0, 1, "", 2, 1000, "c", "1"])
    assert code == -11 and "3 of 4" in detail
    code, _, left = nova.scripts.call("enqueue", keys,
                                      [nova.prefix, job, 0, 1, "", 3, 1000, "d", "1"])
    assert code == 0 and left == 0
    assert nova.job(job).pending == 4
    assert nova.redis.zcard(k.pending("synthetic")) == 4


def test_out_of_order_chunk_is_refused(nova):
    job = "ooo"
    keys, meta = raw_job(nova, job, total=4)
    nova.scripts.call("enqueue", keys, [nova.prefix, job, 1, 0, meta, 0, 1000, "a", "1"])
    code, detail = nova.scripts.call("enqueue", keys, [nova.prefix, job, 0, 0, "", 2, 1000, "c", "1"])
    assert code == -11 and "1 are staged" in detail


@pytest.mark.parametrize("bad", [
    dict(tasks=[], match="at least one task"),
    dict(tasks=[TaskSpec("a", 0)], match="cost"),
    dict(tasks=[TaskSpec("a", float("nan"))], match="cost"),
    dict(tasks=[TaskSpec("a", float("inf"))], match="cost"),
    dict(tasks=[TaskSpec("x" * 70000)], match="longer than"),
    dict(tasks=[TaskSpec("a")], priority=5000, match="priority"),
    dict(tasks=[TaskSpec("a")], max_attempts=0, match="max attempts"),
    dict(tasks=[TaskSpec("a")], app="bad app", match="app name"),
    dict(tasks=[TaskSpec("a")], job_id="has:colon", match="job id"),
])
def test_rejected_job_leaves_nothing_behind(nova, bad):
    bad = dict(bad)
    match = bad.pop("match")
    tasks = bad.pop("tasks")
    app = bad.pop("app", "synthetic")
    before = ns_keys(nova)
    with pytest.raises(InputError, match=match):
        nova.enqueue(app, tasks, **bad)
    assert ns_keys(nova) == before


def test_bad_cost_in_a_later_chunk_leaves_nothing_behind(nova):
    k = nova.keys
    job = "latebad"
    keys, meta = raw_job(nova, job, total=3)
    nova.scripts.call("enqueue", keys, [nova.prefix, job, 1, 0, meta, 0, 1000, "a", "1"])
    code, detail = nova.scripts.call("enqueue", keys,
                                     [nova.prefix, job, 0, 1, "", 1, 1000, "b", "1", "c", "-2"])
    assert code == -9 and "task 2" in detail
    assert nova.redis.hget(k.job(job), "staged") == "1"  # the chunk wrote nothing
    nova.producer.abort(job)
    assert [key for key in ns_keys(nova) if f":{job}" in key] == []
    assert nova.redis.zcard(k.staging()) == 0


@pytest.mark.parametrize("costs, bad", [
    (["1", "1", "nan"], 2), (["1", "2", "1", "1e300"], 3), (["2", "2", "0", "2"], 2),
    (["1", "1", " 1", "1e-10"], 3),
])
def test_every_cost_is_checked_after_a_run_of_valid_ones(nova, costs, bad):
    """check_task_pairs skips a cost equal to the last valid one, and only such a cost."""
    keys, meta = raw_job(nova, "costs", total=len(costs))
    pairs = [x for i, c in enumerate(costs) for x in (f"t{i}", c)]
    code, detail = nova.scripts.call("enqueue", keys, [nova.prefix, "costs", 1, 1, meta, 0,
                                                       1000, *pairs])
    assert code == -9 and f"task {bad}:" in detail
    assert not nova.redis.exists(nova.keys.job("costs"))


def test_client_aborts_a_partly_written_job(nova, monkeypatch):
    """The link drops while the third chunk is packed: the first went alone, the second
    was sent pipelined and its reply is still unread."""
    calls = {"n": 0}
    real = nova.scripts.packed

    def flaky(conn, name, keys, args):
        calls["n"] += 1
        if calls["n"] == 2:
            raise ConnectionError("link dropped")
        return real(conn, name, keys, args)

    monkeypatch.setattr(nova.scripts, "packed", flaky)
    before = ns_keys(nova)
    with pytest.raises(ConnectionError):
        nova.enqueue("synthetic", specs(50), chunk_size=10, job_id="partial")
    assert calls["n"] == 2
    monkeypatch.setattr(nova.scripts, "packed", real)
    # only the namespace's sequence counter moved on (and meta records its protocol); no
    # job, task or index entry remains
    assert [k for k in ns_keys(nova) if k not in (nova.keys.seq(), nova.keys.meta())] == before
    # the connection with a reply left unread was not handed back to the pool as it was
    job = nova.enqueue("synthetic", specs(50), chunk_size=10)
    assert [t.input for t in nova.job(job).tasks] == [s.input for s in specs(50)]


def test_a_chunk_refused_mid_pipeline_enqueues_nothing(nova, monkeypatch):
    """Redis refuses the fourth chunk (a cost no client sends) while the fifth is already
    on its way: that one finds the job out of order and writes nothing; the job is
    deleted and the error names the task."""
    real = nova.producer._chunk_args

    def forged(job_id, meta, tasks, chunk_size, start):
        args = real(job_id, meta, tasks, chunk_size, start)
        if start == 30:
            args[-1] = b"-1"
        return args

    monkeypatch.setattr(nova.producer, "_chunk_args", forged)
    before = ns_keys(nova)
    with pytest.raises(InputError, match="task 39: cost"):
        nova.enqueue("synthetic", specs(60), chunk_size=10, job_id="refused")
    assert [k for k in ns_keys(nova) if k not in (nova.keys.seq(), nova.keys.meta())] == before
    monkeypatch.setattr(nova.producer, "_chunk_args", real)
    job = nova.enqueue("synthetic", specs(60), chunk_size=10)
    assert nova.job(job).total == 60 and nova.redis.ping()


def test_abandoned_staging_job_is_collected_by_reap(nova):
    k = nova.keys
    job = "abandoned"
    keys, meta = raw_job(nova, job, total=300)
    args = [nova.prefix, job, 1, 0, meta, 0, 1000]
    for i in range(150):
        args += [f"p{i}", "1"]
    nova.scripts.call("enqueue", keys, args)
    assert nova.reap()["staged_deleted"] == 0  # not old yet
    nova.redis.zadd(k.staging(), {job: 1})  # seed: created long ago
    deleted = 0
    while nova.redis.exists(k.job(job)):
        deleted += nova.reap(limit=100)["staged_deleted"]
    assert deleted == 150
    assert [key for key in ns_keys(nova) if f":{job}" in key] == []


def test_duplicate_job_id_is_refused(nova):
    nova.enqueue("synthetic", specs(1), job_id="same")
    with pytest.raises(JobExistsError):
        nova.enqueue("synthetic", specs(1), job_id="same")
    assert nova.job("same").total == 1


def test_unicode_and_odd_inputs_round_trip(nova):
    odd = ["emoji 🚀", "日本語", "a\u2028b", "<script>alert(1)</script>", "tab\there", " "]
    job = nova.enqueue("synthetic", [TaskSpec(p) for p in odd])
    assert [t.input for t in nova.job(job).tasks] == odd


def test_large_job_published_onto_a_shorter_queue_joins_it_in_one_call(nova):
    """The queue (5 tasks) moves into the job's stage set (8), which becomes the queue:
    the publishing call leaves nothing to move, and the order is the scores' as ever."""
    urgent = nova.enqueue("synthetic", specs(2), priority=5)
    earlier = nova.enqueue("synthetic", specs(3))
    keys, meta = raw_job(nova, "big", 8)
    res = nova.scripts.call("enqueue", keys, [nova.prefix, "big", 1, 0, meta, 0, 1000,
                                              *["a", "1"] * 4])
    assert res == [0, 4, 0]
    res = nova.scripts.call("enqueue", keys, [nova.prefix, "big", 0, 1, "", 4, 1000,
                                              *["b", "1"] * 4])
    assert res == [0, 8, 0]
    order = nova.redis.zrange(nova.keys.pending("synthetic"), 0, -1)
    assert order == ([f"{urgent}:{i}" for i in range(2)] + [f"{earlier}:{i}" for i in range(3)]
                     + [f"big:{i}" for i in range(8)])
    assert not nova.redis.exists(nova.keys.stage("big"))
    assert nova.job("big", with_tasks=False).state == "queued"


def test_large_job_published_onto_a_backlog_keeps_priority_then_fifo(nova):
    backlog = nova.enqueue("synthetic", specs(1500), chunk_size=1000)
    urgent = nova.enqueue("synthetic", specs(1200), chunk_size=500, priority=5)
    later = nova.enqueue("synthetic", specs(1100), chunk_size=500)
    order = nova.redis.zrange(nova.keys.pending("synthetic"), 0, -1)
    assert order == ([f"{urgent}:{i}" for i in range(1200)] + [f"{backlog}:{i}" for i in range(1500)]
                     + [f"{later}:{i}" for i in range(1100)])
    assert not nova.redis.exists(nova.keys.stage(urgent), nova.keys.stage(later))
