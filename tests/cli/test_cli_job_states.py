"""How the CLI shows a job's end: ``failed`` when every task failed, ``done`` with the failed
count when some did; ``status`` (text, ``--json``, and the job table without a job), the
Python API agreeing with the JSON, and ``enqueue --wait`` exiting 1 with a line saying why."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from novatests.cli import background, enqueue_ok, nova_env, ok, status_json, write
from novatests.leases import commit, join

from nova_queue.local import wait_for


def end_tasks(nova, outcomes: str, wid: str = "w") -> None:
    """Claim the namespace's tasks one by one and end them: ``f`` fails one (its error
    names its index), ``d`` commits one."""
    for outcome in outcomes:
        [lease] = nova.claim(wid, "synthetic").leases
        if outcome == "f":
            nova.fail(wid, lease, "error", f"boom {lease.index}")
        else:
            commit(nova, wid, lease)


def job_of(invoke, tmp_path: Path, n: int, name: str) -> str:
    """A synthetic job of ``n`` prompts and one attempt per task."""
    prompts = "".join(f"{name} {i}\n" for i in range(n)).encode()
    return enqueue_ok(invoke, write(tmp_path, prompts, name), "--max-attempts", "1")


def test_status_of_a_job_whose_every_task_failed(invoke, nova, tmp_path):
    join(nova, "w")
    job = job_of(invoke, tmp_path, 2, "doomed")
    end_tasks(nova, "ff")
    lines = ok(invoke("status", job)).stdout.split("\n")
    assert lines[0].startswith(f"job {job}  app synthetic  state failed  ")
    assert lines[1] == "  2 tasks: 0 pending, 0 running, 0 done, 2 failed, 0 cancelled"
    assert re.split(r"\s+", lines[2].strip()) == ["#", "STATE", "WORKER", "BACKEND", "ATT",
                                                  "GEN", "ERROR", "PROMPT"]
    for i in range(2):
        row = lines[3 + i]
        assert re.match(rf"\s+{i}\s+failed\s", row) and f"error: boom {i}" in row, row
    st = status_json(invoke, job)
    assert (st["state"], st["done"], st["failed"], st["pending"]) == ("failed", 0, 2, 0)
    assert [t["error"] for t in st["tasks"]] == ["boom 0", "boom 1"]


def test_status_json_and_the_python_api_agree_on_a_failed_job(invoke, nova, tmp_path):
    join(nova, "w")
    job = job_of(invoke, tmp_path, 3, "mixed")
    end_tasks(nova, "fdf")
    st = status_json(invoke, job)
    api = nova.job(job)
    added = ("eligible_workers", "cannot_run", "waiting", "predicted_finish_ms", "on_time",
             "predicted_cost", "behind_ms", "budget_held_ms", "placement")  # the live pool's
    assert {k: v for k, v in st.items() if k not in added} == api.to_json()
    assert (api.state, api.done, api.failed, api.finished) == ("done", 1, 2, True)
    failed = job_of(invoke, tmp_path, 1, "doomed")
    end_tasks(nova, "f")
    st, api = status_json(invoke, failed), nova.job(failed)
    added = ("eligible_workers", "cannot_run", "waiting", "predicted_finish_ms", "on_time",
             "predicted_cost", "behind_ms", "budget_held_ms", "placement")  # the live pool's
    assert {k: v for k, v in st.items() if k not in added} == api.to_json()
    assert (api.state, api.failed, api.finished) == ("failed", 1, True)


def table_rows(out: str) -> dict[str, list[str]]:
    """``status``'s job table: the header's columns, and each job's row by its id."""
    head, *rows = [line.split() for line in out.strip().split("\n")]
    assert head == ["JOB", "STATE", "DONE", "FAILED", "CANCEL", "TOTAL", "APP", "NAME"], head
    return {row[0]: row[1:] for row in rows}


def test_status_without_a_job_lists_jobs_with_their_failed_counts(invoke, nova, tmp_path):
    assert ok(invoke("status")).stdout == "no jobs\n"
    join(nova, "w")
    failed = job_of(invoke, tmp_path, 2, "doomed")
    end_tasks(nova, "ff")
    partial = job_of(invoke, tmp_path, 3, "mixed")
    end_tasks(nova, "dfd")
    queued = job_of(invoke, tmp_path, 1, "waiting")
    rows = table_rows(ok(invoke("status")).stdout)
    assert rows == {failed: ["failed", "0", "2", "0", "2", "synthetic", "doomed"],
                    partial: ["done", "2", "1", "0", "3", "synthetic", "mixed"],
                    queued: ["queued", "0", "0", "0", "1", "synthetic", "waiting"]}
    assert list(rows) == [queued, partial, failed]  # newest first
    assert list(table_rows(ok(invoke("status", "--limit", "1")).stdout)) == [queued]
    listed = json.loads(ok(invoke("status", "--json")).stdout)
    assert listed == [j.to_json(with_tasks=False) for j in nova.jobs(20)]
    assert [(j["state"], j["failed"]) for j in listed] == [("queued", 0), ("done", 1),
                                                           ("failed", 2)]


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_enqueue_wait_on_a_job_whose_every_task_fails_exits_1(redis_url, namespace, nova,
                                                              tmp_path):
    env = nova_env(redis_url, namespace, tmp_path)
    prompts = write(tmp_path, b"boom one\nboom two\n")
    args = ["--app", "synthetic", "-p", "seconds=0.01", "-p", "crash_on=boom",
            "--max-attempts", "1", "--wait"]
    with background(["enqueue", str(prompts), *args], env,
                    log_path=tmp_path / "wait-text.log") as text, \
         background(["enqueue", str(prompts), *args, "--json"], env,
                    log_path=tmp_path / "wait-json.log") as as_json:
        wait_for(lambda: len(nova.jobs()) == 2, timeout_s=30, message="both jobs enqueued")
        with background(["worker", "--app", "synthetic", "--burst"], env,
                        log_path=tmp_path / "worker.log") as worker:
            out_text, _ = text.communicate(timeout=60)
            out_json, _ = as_json.communicate(timeout=60)
            assert worker.wait(timeout=30) == 0, (tmp_path / "worker.log").read_text()
    err_text = (tmp_path / "wait-text.log").read_text()
    assert text.returncode == 1, err_text
    job = out_text.decode().split("\n")[0]
    assert re.fullmatch(rf"job {job} failed in [\d.]+ s: 0 done, 2 failed, 0 cancelled of 2",
                        out_text.decode().strip().split("\n")[-1]), out_text
    assert (f"error: job {job} failed: 2 of its 2 tasks failed, none done; 'nova-queue status "
            f"{job}' shows each task's error\n") in err_text, err_text
    final = json.loads(out_json)
    assert as_json.returncode == 1, (tmp_path / "wait-json.log").read_text()
    assert (final["state"], final["done"], final["failed"]) == ("failed", 0, 2)
    assert f"error: job {final['job_id']} failed:" in (tmp_path / "wait-json.log").read_text()
