"""An invalid output is the worker's fault, not the task's (issue 31), against seeded state:
``fail`` kind ``invalid`` hands the lease back without using an attempt, counts against
the worker, marks it ``cannot_run`` for the job's app and model (the reason names the
problem; claims then offer it none of that job), and is free only a few times per task:
past that, while another worker succeeds, it counts as an error (an attempt)."""

from __future__ import annotations

import json

from novatests.leases import commit, events, join, setup_job, task_hash, worker_hash
from novatests.seed import set_speed

PER_TASK = 3  # common.lua FREE_BACKS_PER_TASK
BLACK = "invalid output: all-black image"


def test_an_invalid_output_uses_no_attempt_counts_against_the_worker_and_marks_it(nova):
    job = setup_job(nova, 3)
    join(nova, "w")
    lease = nova.claim("w", "synthetic").leases[0]
    assert nova.fail("w", lease, "invalid", BLACK).state == "pending"
    h = task_hash(nova, lease.task_id)
    assert (h["state"], h["attempt_count"], h["error_kind"], h["error"]) == (
        "pending", "0", "invalid", BLACK)
    assert "failed_on" not in h
    w = worker_hash(nova, "w")
    assert w["failures"] == "1" and w.get("quarantined") != "1"
    [mark] = json.loads(w["cannot_run"])
    assert (mark["app"], mark["model"], mark["reason"]) == ("synthetic", "", BLACK)
    assert nova.claim("w", "synthetic").leases == []  # marked: offered none of it
    assert nova.job(job, with_tasks=False).pending == 3
    [ev] = events(nova, "requeued")
    assert (ev.fields["kind"], ev.fields["error"], ev.fields["attempt"]) == (
        "invalid", BLACK, "0")


def test_invalid_hand_backs_of_one_task_are_free_only_a_few_times(nova):
    join(nova, "honest")
    set_speed(nova, "honest", "synthetic", 0.1)
    setup_job(nova, 1)  # the pool works: honest commits a task of another job
    commit(nova, "honest", nova.claim("honest", "synthetic").leases[0])
    setup_job(nova, 1, max_attempts=3)
    states = []
    for i in range(PER_TASK + 1):  # a new broken worker each time: each is marked after one
        wid = f"broken{i}"
        join(nova, wid)
        set_speed(nova, wid, "synthetic", 0.1)
        lease = nova.claim(wid, "synthetic").leases[0]
        nova.fail(wid, lease, "invalid", BLACK)
        states.append(task_hash(nova, lease.task_id)["attempt_count"])
    assert states == ["0"] * PER_TASK + ["1"]  # the 4th counts: no free loop
    assert task_hash(nova, lease.task_id)["error_kind"] == "error"
