"""The texts of a gallery card (``present.task_view``) for each state of a task: who has it,
its predicted and actual run time, its backup attempt, and its result's URLs (only for the
task's own result key)."""

from __future__ import annotations

import dataclasses

import pytest

from nova_queue.models import TaskInfo
from nova_queue.web.present import task_view

JOB = "j1"


def task(**changes) -> TaskInfo:
    base = TaskInfo(task_id=f"{JOB}:0", job_id=JOB, index=0, state="pending", input="a fox",
                    cost=1.0, lease_gen=0, attempt_count=0, attempt_id="", worker_id="",
                    worker_name="", backend="", host="", result="", claimed_ms=None,
                    finished_ms=None, deadline_ms=None, predicted_s=None, run_s=None,
                    cold_s=None, warm=None, error="", error_kind="", last_worker_id="",
                    meta={})
    return dataclasses.replace(base, **changes)


def url(key: str) -> str:
    return f"/results/{key}"


@pytest.mark.parametrize("changes, owner", [
    ({}, "waiting for a worker"),
    ({"attempt_count": 2}, "requeued after attempt 2"),
    ({"state": "leased", "worker_name": "w1", "backend": "cuda", "host": "h9"},
     "running on w1 (CUDA on h9)"),
    ({"state": "leased", "worker_id": "w-id", "backend": "cpu"}, "running on w-id (CPU)"),
    ({"state": "failed", "attempt_count": 1}, "failed after 1 attempt"),
    ({"state": "failed", "attempt_count": 3}, "failed after 3 attempts"),
    ({"state": "cancelled"}, "cancelled"),
    ({"state": "done", "worker_name": "w2"}, "by w2"),
    ({"state": "done"}, "done"),
])
def test_who_has_the_task_by_its_state(changes, owner):
    assert task_view(task(**changes), url)["owner_text"] == owner


@pytest.mark.parametrize("predicted, actual, text", [
    (None, None, ""),
    (2.0, None, "predicted 2.00 s"),
    (None, 1.5, "actual 1.50 s"),
    (2.0, 1.5, "predicted 2.00 s · actual 1.50 s"),
])
def test_predicted_and_actual_run_time(predicted, actual, text):
    view = task_view(task(predicted_s=predicted, run_s=actual), url)
    assert view["timing_text"] == text


def test_a_backup_attempt_while_it_runs_and_when_it_won():
    backup = {"worker": "fast", "worker_id": "w-fast", "backend": "cuda", "lease_gen": 2,
              "claimed_ms": 1}
    assert task_view(task(state="leased", backup=backup), url)["backup_text"] == "backup on fast"
    assert task_view(task(state="leased", backup={**backup, "worker": ""}),
                     url)["backup_text"] == "backup on w-fast"
    assert task_view(task(state="done", won_by_backup=True), url)["backup_text"] == "backup won"
    assert task_view(task(state="leased"), url)["backup_text"] == ""


def test_result_urls_only_for_the_tasks_own_key():
    own = f"jobs/{JOB}/results/00000-g1-a1.png"
    view = task_view(task(state="done", lease_gen=1, attempt_id="a1", result=own), url)
    assert (view["result_url"], view["image_url"]) == (url(own), url(own))
    forged = task_view(task(state="done", lease_gen=1, attempt_id="a1",
                            result="jobs/other/results/00000-g1-a1.png"), url)
    assert (forged["result_url"], forged["image_url"]) == (None, None)
    text = task_view(task(state="done", lease_gen=1, attempt_id="a1",
                          result=f"jobs/{JOB}/results/00000-g1-a1.txt"), url)
    assert (text["result_url"], text["image_url"]) == (url(text["result"]), None)
