"""What the client reads back from Redis, when a worker credential wrote it by hand.

The worker role may HSET any field of its namespace (docs/SECURITY.md). A job's ``done`` set
to ``inf`` made every reader of jobs raise OverflowError (the gallery's home page answered
500 for everyone, ``nova-queue status`` crashed), and task hashes planted a thousand indexes
apart made ``client.job`` read a million empty ones per 1000 planted (32 s for 2,000). Now a
field that is not a finite number in range reads as its default, a JSON field that is not an
object as ``{}``, and a job's tasks are read up to the first missing one.
"""

from __future__ import annotations

import math

import pytest
from novatests.seed import FORGED_VALUES, forge_fields

from nova_queue import TaskSpec
from nova_queue.models import MAX_FIELD_NUMBER, float_field, int_field, object_field


@pytest.mark.parametrize("value", FORGED_VALUES + ["", None, "-1e16", str(2**53 + 2)])
def test_unreadable_numbers_read_as_their_default(value):
    assert int_field(value, 7) == 7
    assert float_field(value) is None


@pytest.mark.parametrize("value, expected", [
    ("3", 3), ("-2", -2), ("2.9", 2), ("1e3", 1000), (" 5 ", 5), (str(MAX_FIELD_NUMBER),
                                                                  MAX_FIELD_NUMBER)])
def test_numbers_in_range_read_as_such(value, expected):
    assert int_field(value) == expected
    assert math.isclose(float_field(value), float(value))


@pytest.mark.parametrize("value", ["[1]", "1", '"text"', "null", "[" * 100_000, "{", "", None])
def test_json_fields_that_are_not_objects_read_as_empty(value):
    assert object_field(value) == {}
    assert object_field('{"seed": 1}') == {"seed": 1}


@pytest.mark.parametrize("value", FORGED_VALUES)
def test_every_reader_survives_forged_fields(nova, value):
    job = nova.enqueue("synthetic", [TaskSpec(f"p{i}", 1.0) for i in range(3)])
    nova.register_worker("w", {"name": "w"}, ["synthetic"])
    [lease] = nova.claim("w", "synthetic").leases
    nova.fail("w", lease, "error", "boom")
    forge_fields(nova, value, job_ids=[job], worker_ids=["w"])
    st = nova.job(job)
    assert st.job_id == job and st.total == 0 and st.done == 0  # unreadable: the default
    assert len(nova.tasks(job, 0, 3)) == 3 and nova.tasks(job) == []  # total unreadable
    assert all(t.meta == {} and t.run_s is None for t in nova.tasks(job, 0, 3))
    assert [j.job_id for j in nova.jobs()] == [job]
    [w] = nova.workers()
    assert w.tasks_done == 0 and w.capability == {} and w.speeds["synthetic"]["ema_s"] is None
    assert [t.task_id for t in nova.failed_tasks()] in ([], [lease.task_id])
    for info in (st, w):
        info.to_json()


def test_tasks_planted_far_apart_are_not_walked_to(nova, r):
    job = nova.enqueue("synthetic", [TaskSpec(f"p{i}", 1.0) for i in range(3)])
    nova.redis.hset(nova.keys.job(job), "total", 10**12)
    for k in range(1, 201):  # one hash every 1000 indexes defeated "1000 missing in a row"
        nova.redis.hset(nova.keys.task(f"{job}:{k * 1000}"), "state", "pending")
    before = r.info("commandstats").get("cmdstat_hgetall", {}).get("calls", 0)
    st = nova.job(job)
    calls = r.info("commandstats")["cmdstat_hgetall"]["calls"] - before
    assert [t.index for t in st.tasks] == [0, 1, 2]
    assert calls <= 1 + 1000  # the job hash and one chunk, not 200 chunks
