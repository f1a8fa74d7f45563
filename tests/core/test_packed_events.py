"""One entry per call for the claimed and completed events of several tasks (claimed_many,
completed_many: nova_queue/lua/includes/pack_events.lua), read back as one event per task
in the order single calls write them (nova_queue/events.py, unpack)."""

import pytest
from novatests.leases import join, rkey, setup_job, task_hash
from novatests.seed import expire_lease, set_speed

from nova_queue.client import BatchCommit
from nova_queue.events import EVENT_TYPES, entry_events, unpack


def entries(nova):
    """The raw stream: (type, fields) per entry."""
    return [(f["type"], f) for _, f in nova.redis.xrange(nova.keys.events(), "-", "+")]


def fast(nova, wid):
    join(nova, wid)
    set_speed(nova, wid, "synthetic", 0.01)


def test_a_claim_of_four_writes_one_entry_read_back_as_four_claimed_events(nova):
    job = setup_job(nova, 6)
    fast(nova, "w1")
    before = len(entries(nova))
    leases = nova.claim("w1", "synthetic", 4).leases
    raw = entries(nova)[before:]
    assert [t for t, _ in raw] == ["claimed_many"]
    assert raw[0][1]["task"] == "0,1,2,3" and raw[0][1]["job"] == job  # one job: once
    evs = [e for e in nova.events(count=1000) if e.type == "claimed"]
    assert [e.part for e in evs] == [0, 1, 2, 3] and len({e.id for e in evs}) == 1
    for e, lease in zip(evs, leases):
        h = task_hash(nova, lease.task_id)
        assert list(e.fields) == list(EVENT_TYPES["claimed"].fields)
        assert e.fields == {"job": job, "task": str(lease.index), "worker": "w1", "name": "w1",
                            "backend": "cpu", "lease_gen": h["lease_gen"],
                            "attempt": h["attempt_count"], "predicted_s": h["predicted_s"]}


def test_a_claim_of_one_writes_the_plain_event(nova):
    setup_job(nova, 2)
    fast(nova, "w1")
    before = len(entries(nova))
    nova.claim("w1", "synthetic", 1)
    assert [t for t, _ in entries(nova)[before:]] == ["claimed"]


def test_batched_commits_keep_the_order_of_single_commits(nova):
    """A stale commit in the middle and a job finishing mid-batch split the entry: each
    event comes where single commits put it."""
    small, big = setup_job(nova, 2), setup_job(nova, 30)
    fast(nova, "w1")
    fast(nova, "w2")
    leases = nova.claim("w1", "synthetic", 5).leases
    assert [x.job_id for x in leases] == [small, small, big, big, big]
    expire_lease(nova, leases[3].task_id)
    nova.claim("w2", "synthetic")  # takes leases[3]'s task anew: that commit is stale
    before = len(entries(nova))
    nova.complete_batch("w1", [BatchCommit(x, rkey(x), 0.1, True) for x in leases])
    assert [t for t, _ in entries(nova)[before:]] == [
        "completed_many", "job_finished", "completed", "stale_rejected", "completed"]
    evs = [e for e in nova.events(count=1000)
           if e.type in ("completed", "job_finished", "stale_rejected")]
    assert [(e.type, e.fields.get("job"), e.fields.get("task")) for e in evs] == [
        ("completed", small, "0"), ("completed", small, "1"), ("job_finished", small, None),
        ("completed", big, "0"), ("stale_rejected", big, "1"), ("completed", big, "2")]
    assert [e.fields["result"] for e in evs if e.type == "completed"] == [
        rkey(x) for i, x in enumerate(leases) if i != 3]


def test_a_batch_of_commits_writes_one_entry(nova):
    setup_job(nova, 40)
    fast(nova, "w1")
    leases = nova.claim("w1", "synthetic", 8).leases
    before = len(entries(nova))
    res = nova.complete_batch("w1", [BatchCommit(x, rkey(x), 0.1 * (i % 2), i % 2 == 0)
                                     for i, x in enumerate(leases)], app="synthetic", k=8)
    assert [t for t, _ in entries(nova)[before:]] == ["completed_many", "claimed_many"]
    done = [e for e in nova.events(count=1000) if e.type == "completed"]
    assert [e.fields["warm"] for e in done] == ["1", "0"] * 4
    assert [e.fields["run_s"] for e in done] == ["0", "0.1"] * 4
    assert len(res.claimed.leases) == 8


PACKED = {"type": "completed_many", "worker": "w1", "job": "J", "task": "0,1,2",
          "lease_gen": "1,2,1", "run_s": "0.5", "warm": "1", "result": "a,b,c"}


def test_unpack_broadcasts_single_values_and_keeps_the_field_order():
    out = unpack(PACKED)
    assert out == [{"type": "completed", "job": "J", "task": str(i), "worker": "w1",
                    "lease_gen": g, "run_s": "0.5", "warm": "1", "result": r}
                   for i, g, r in ((0, "1", "a"), (1, "2", "b"), (2, "1", "c"))]
    assert [list(f) for f in out] == [["type", *EVENT_TYPES["completed"].fields]] * 3
    evs = entry_events("1700000000000-5", PACKED)
    assert [(e.id, e.part, e.ts_ms, e.type) for e in evs] == [
        ("1700000000000-5", i, 1700000000000, "completed") for i in range(3)]


@pytest.mark.parametrize("change", [
    {"lease_gen": "1,2"},                       # neither one value nor one per task
    {"task": "0"},                              # a packed entry of one task
    {"task": ",".join(map(str, range(65)))},    # more than MAX_CLAIM_K
    {"worker": None},                           # a shared field missing
    {"result": None},                           # a list field missing
])
def test_an_entry_the_scripts_did_not_write_comes_back_as_it_is(change):
    fields = {k: v for k, v in {**PACKED, **change}.items() if v is not None}
    assert unpack(fields) == [fields]


def test_a_plain_entry_is_one_event():
    f = {"type": "job_cancelled", "job": "J"}
    assert unpack(f) == [f] and unpack(f) is not f


def test_the_gallery_keys_each_event_of_a_packed_entry_apart():
    from nova_queue.web import present

    views = [present.event_view(e, {"w1": "gpu-a"}) for e in entry_events("17-0", PACKED)]
    assert [v["id"] for v in views] == ["17-0"] * 3  # the cursor: the entry's stream id
    assert [v["key"] for v in views] == ["17-0/0", "17-0/1", "17-0/2"]
    assert [v["text"] for v in views] == [present.event_text(e, {"w1": "gpu-a"})
                                          for e in entry_events("17-0", PACKED)]
