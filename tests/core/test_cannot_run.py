"""Preparation failures are the worker's, not the task's (issue 27, item 1), against seeded
state: ``fail`` kind ``prepare`` hands a lease back without using an attempt and marks the
worker (``cannot_run``: written, deduplicated, bounded, expiring); claims offer a marked
worker no such job and no backup of one, and other workers' claims do not wait for it.
"""

from __future__ import annotations

import json

import pytest
from novatests.leases import backdate, events, join, setup_job, task_hash, worker_hash
from novatests.seed import set_speed

from nova_queue import TaskSpec
from nova_queue.cannot_run import live_marks
from nova_queue.errors import BAD_INPUT, WAIT_MS
from nova_queue.limits import MAX_CANNOT_RUN, MAX_REASON_BYTES

NO_TORCH = "No module named 'torch'; to fix: pip install 'nova-queue[txt2img]'"


def marks(nova, wid: str) -> list[dict]:
    raw = worker_hash(nova, wid).get("cannot_run")
    return json.loads(raw) if raw else []


def measured(nova, wid: str, s_per_cost: float = 1.0) -> None:
    """``wid`` joins with a measured speed (an unmeasured worker explores one task at a time)."""
    join(nova, wid)
    set_speed(nova, wid, "synthetic", s_per_cost)


def model_job(nova, model: str, n: int = 2, priority: int = 0) -> str:
    return nova.enqueue("synthetic", [TaskSpec(f"{model}-{i}", 1.0) for i in range(n)],
                        model=model, priority=priority)


def test_a_prepare_failure_uses_no_attempt_and_marks_the_worker(nova):
    job = setup_job(nova, 3)
    join(nova, "w")
    leases = nova.claim("w", "synthetic", k=3).leases
    now = nova.server_time_ms()
    for lease in leases:
        assert nova.fail("w", lease, "prepare", NO_TORCH).state == "pending"
    for lease in leases:
        h = task_hash(nova, lease.task_id)
        assert (h["state"], h["attempt_count"], h["error_kind"], h["error"]) == (
            "pending", "0", "prepare", NO_TORCH)
        assert "failed_on" not in h
    st = nova.job(job, with_tasks=False)
    assert (st.pending, st.failed, st.leased) == (3, 0, 0)
    w = worker_hash(nova, "w")
    assert "failures" not in w and "fail_streak" not in w and w.get("quarantined") != "1"
    [mark] = marks(nova, "w")  # three failures of one (app, model): one mark
    assert (mark["app"], mark["model"], mark["reason"]) == ("synthetic", "", NO_TORCH)
    ttl_ms = nova.settings.cannot_run_s * 1000
    assert now - 1000 <= mark["since_ms"] <= now + 1000
    assert mark["until_ms"] - mark["since_ms"] == pytest.approx(ttl_ms, abs=1000)
    assert {e.fields["kind"] for e in events(nova, "requeued")} == {"prepare"}


def test_a_repeat_renews_its_mark_and_a_reason_is_cut_to_whole_characters(nova):
    model_job(nova, "m1", 2)
    measured(nova, "w")
    first, second = nova.claim("w", "synthetic", k=2).leases
    nova.fail("w", first, "prepare", "first reason")
    [before] = marks(nova, "w")
    long = "é" * MAX_REASON_BYTES  # 2 bytes each: the cut must not split one
    nova.fail("w", second, "prepare", long)
    [after] = marks(nova, "w")
    assert after["since_ms"] == before["since_ms"] and after["until_ms"] >= before["until_ms"]
    assert after["reason"] == "é" * (MAX_REASON_BYTES // 2)
    assert task_hash(nova, second.task_id)["error"] == long  # the task keeps it whole


def test_marks_are_bounded_past_the_cap_a_prepare_failure_uses_an_attempt(nova):
    measured(nova, "w")
    for i in range(MAX_CANNOT_RUN):  # each at the head of the queue (a claim looks at 8)
        model_job(nova, f"m{i}", 1, priority=i)
        [lease] = nova.claim("w", "synthetic").leases
        assert nova.fail("w", lease, "prepare", f"cannot load m{i}").state == "pending"
    assert len(marks(nova, "w")) == MAX_CANNOT_RUN
    last = model_job(nova, "m-last", 1, priority=MAX_CANNOT_RUN)
    [lease] = nova.claim("w", "synthetic").leases
    assert lease.job_id == last
    nova.fail("w", lease, "prepare", "cannot load m-last")
    h = task_hash(nova, lease.task_id)
    assert (h["attempt_count"], h["error_kind"], h["failed_on"]) == ("1", "error", "w")
    assert len(marks(nova, "w")) == MAX_CANNOT_RUN
    assert worker_hash(nova, "w")["failures"] == "1"


def test_a_claim_skips_the_jobs_its_marks_cover_and_takes_the_others(nova):
    torch_job = model_job(nova, "sd-turbo", 2)
    other = model_job(nova, "tiny", 2)
    measured(nova, "w")
    leases = nova.claim("w", "synthetic", k=2).leases
    assert {x.job_id for x in leases} == {torch_job}
    for lease in leases:
        nova.fail("w", lease, "prepare", "model sd-turbo is not available on this worker")
    got = nova.claim("w", "synthetic", k=4).leases
    assert {x.job_id for x in got} == {other} and len(got) == 2
    for lease in got:
        nova.complete("w", lease, f"jobs/{lease.job_id}/results/{lease.index:05d}-g"
                      f"{lease.lease_gen}-{lease.attempt_id}.png", run_s=0.1, warm=True)
    res = nova.claim("w", "synthetic")
    assert res.status == "wait" and res.retry_after_s == WAIT_MS["BLOCKED"] / 1000
    measured(nova, "capable")
    assert {x.job_id for x in nova.claim("capable", "synthetic", k=2).leases} == {torch_job}


def test_a_mark_expires_and_the_claim_forgets_it(nova):
    job = setup_job(nova, 1)
    join(nova, "w")
    [lease] = nova.claim("w", "synthetic").leases
    nova.fail("w", lease, "prepare", "no disk")
    assert nova.claim("w", "synthetic").status == "wait"
    [mark] = marks(nova, "w")
    mark["until_ms"] = nova.server_time_ms() - 1
    nova.redis.hset(nova.keys.worker("w"), "cannot_run", json.dumps([mark]))
    again = nova.claim("w", "synthetic").leases
    assert [x.job_id for x in again] == [job]
    assert "cannot_run" not in worker_hash(nova, "w")


def test_a_marked_worker_gets_no_backup_of_such_a_job(nova):
    job = setup_job(nova, 1)
    measured(nova, "slow", 100.0)
    [lease] = nova.claim("slow", "synthetic").leases
    measured(nova, "w", 0.01)
    backdate(nova, lease.task_id, 60_000)  # running for a minute: a backup would pay
    mark = {"app": "synthetic", "model": "", "reason": "no disk", "since_ms": 1,
            "until_ms": nova.server_time_ms() + 60_000}
    nova.redis.hset(nova.keys.worker("w"), "cannot_run", json.dumps([mark]))
    assert nova.claim("w", "synthetic").status == "wait"
    nova.redis.hdel(nova.keys.worker("w"), "cannot_run")
    [backup] = nova.claim("w", "synthetic").leases  # without the mark: a backup
    assert backup.job_id == job


def test_other_workers_do_not_wait_for_a_marked_fast_worker(nova):
    job = model_job(nova, "m1", 3)
    measured(nova, "fast", 1.0)
    measured(nova, "slow", 10.0)
    assert nova.claim("slow", "synthetic").status == "wait"  # the tail is fast's
    mark = {"app": "synthetic", "model": "m1", "reason": "cannot load m1", "since_ms": 1,
            "until_ms": nova.server_time_ms() + 60_000}
    nova.redis.hset(nova.keys.worker("fast"), "cannot_run", json.dumps([mark]))
    [lease] = nova.claim("slow", "synthetic").leases
    assert lease.job_id == job
    # a mark of another model (or app) does not count
    mark["model"] = "m2"
    nova.redis.hset(nova.keys.worker("fast"), "cannot_run", json.dumps([mark]))
    assert nova.claim("slow", "synthetic").status == "wait"


@pytest.mark.parametrize("value", ["junk", "{}", "[1, 2]", "[" * 100_000, "x" * 40_000,
                                   json.dumps([{"app": "synthetic", "model": "",
                                                "until_ms": "9e99"}])])
def test_a_forged_field_counts_as_no_mark_and_a_failure_writes_a_valid_one(nova, value):
    job = setup_job(nova, 1)
    join(nova, "w")
    nova.redis.hset(nova.keys.worker("w"), "cannot_run", value)
    assert live_marks(value, nova.server_time_ms()) == []
    [lease] = nova.claim("w", "synthetic").leases
    assert lease.job_id == job
    nova.fail("w", lease, "prepare", "no disk")
    assert [(m["app"], m["reason"]) for m in marks(nova, "w")] == [("synthetic", "no disk")]


def test_bad_prepare_input_is_refused_and_writes_nothing(nova):
    setup_job(nova, 1)
    join(nova, "w")
    [lease] = nova.claim("w", "synthetic").leases
    keys = [nova.keys.task(lease.task_id), nova.keys.job(lease.job_id), nova.keys.worker("w"),
            nova.keys.held("w"), nova.keys.pending("synthetic"), nova.keys.leases(),
            nova.keys.inflight(), nova.keys.failed(), nova.keys.finished(), nova.keys.events()]
    base = [nova.prefix, "w", lease.task_id, lease.lease_gen, lease.attempt_id, "prepare",
            "no disk", 1000, 5, 2000, 300_000, 1]
    for mark_ms in ([], ["0"], ["999"], ["86400001"], ["nan"], ["1e400"]):
        res = nova.scripts.call("fail", keys, [*base, *mark_ms])
        assert res[0] == BAD_INPUT and "mark time" in res[1], mark_ms
    res = nova.scripts.call("fail", keys, [*base[:5], "prepared", *base[6:], 60_000])
    assert res[0] == BAD_INPUT and "unknown failure kind" in res[1]
    assert task_hash(nova, lease.task_id)["state"] == "leased"
    assert "cannot_run" not in worker_hash(nova, "w")
    # other kinds ignore the argument, as before
    res = nova.scripts.call("fail", keys, [*base[:5], "infra", *base[6:]])
    assert res[0] == 0
