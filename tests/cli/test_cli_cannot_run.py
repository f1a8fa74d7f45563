"""What the CLI says about workers that could not prepare a job (their ``cannot_run``
marks): ``status`` (text and ``--json``) says why a job no live worker can run waits,
worker by worker; ``enqueue`` warns the same way; ``workers`` (text and ``--json``) shows
each live mark. The marks are written by the fail script itself (kind ``prepare``)."""

from __future__ import annotations

import json

from novatests.cli import enqueue_ok, ok, status_json, write
from novatests.leases import join
from novatests.seed import set_speed

NO_TORCH = "No module named 'torch'; to fix: pip install 'nova-queue[txt2img]'"
EVIL = "bad\x1b[2Jdriver\u202e"


def unable(nova, wid: str, job_id: str, reason: str = NO_TORCH) -> None:
    """``wid`` claims the job's tasks and fails to prepare them (it is then marked)."""
    set_speed(nova, wid, "synthetic", 1.0)
    for lease in nova.claim(wid, "synthetic", k=8).leases:
        nova.fail(wid, lease, "prepare", reason)


def test_status_says_why_a_job_no_live_worker_can_run_waits(invoke, nova, tmp_path):
    join(nova, "w1")
    job = enqueue_ok(invoke, write(tmp_path, b"a\nb\n"))
    unable(nova, "w1", job)
    out = ok(invoke("status", job)).stdout
    assert f"  waiting: no live worker can run this job — w1: {NO_TORCH}\n" in out
    assert "0 failed" in out
    data = status_json(invoke, job)
    assert data["eligible_workers"] == 0
    assert data["waiting"] == f"no live worker can run this job — w1: {NO_TORCH}"
    [blocked] = data["cannot_run"]
    assert (blocked["worker_id"], blocked["name"], blocked["reason"]) == ("w1", "w1", NO_TORCH)
    assert blocked["until"] > blocked["since"] > 0
    join(nova, "w2")  # a worker that can: no longer waiting, w1 still listed
    assert "waiting" not in ok(invoke("status", job)).stdout
    data = status_json(invoke, job)
    assert (data["eligible_workers"], data["waiting"]) == (1, None)
    assert [b["name"] for b in data["cannot_run"]] == ["w1"]


def test_enqueue_warns_when_the_live_workers_cannot_prepare_it(invoke, nova, tmp_path):
    join(nova, "w1")
    first = enqueue_ok(invoke, write(tmp_path, b"a\n"))
    unable(nova, "w1", first)
    res = ok(invoke("enqueue", str(write(tmp_path, b"b\n")), "--app", "synthetic"))
    assert res.stderr == (f"warning: no live worker can run this job — w1: {NO_TORCH}; the "
                          "job waits until one joins\n")


def test_workers_show_live_marks_only_and_never_raw_control_characters(invoke, nova,
                                                                      tmp_path):
    join(nova, "w1")
    job = enqueue_ok(invoke, write(tmp_path, b"a\n"))
    unable(nova, "w1", job, EVIL)
    out = ok(invoke("workers")).stdout
    # the script stores control characters as spaces; the CLI escapes the rest (bidi)
    assert "    cannot run synthetic: bad [2Jdriver\\u202e\n" in out and "\u202e" not in out
    [w] = json.loads(ok(invoke("workers", "--json")).stdout)
    [mark] = w["cannot_run"]
    assert (mark["app"], mark["model"], mark["reason"]) == ("synthetic", "", "bad [2Jdriver\u202e")
    assert mark["until"] - mark["since"] == nova.settings.cannot_run_s * 1000
    expired = {**json.loads(nova.redis.hget(nova.keys.worker("w1"), "cannot_run"))[0],
               "until_ms": 1}
    nova.redis.hset(nova.keys.worker("w1"), "cannot_run", json.dumps([expired]))
    assert "cannot run" not in ok(invoke("workers")).stdout
    assert json.loads(ok(invoke("workers", "--json")).stdout)[0]["cannot_run"] == []
    assert "waiting" not in ok(invoke("status", job)).stdout
