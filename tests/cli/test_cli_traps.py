"""The small things that misled a first-time user: a second ``cancel`` said it cancelled
again; ``owners`` showed apps queued long after their jobs finished; a purged job read
"expired"."""

from __future__ import annotations

import json

from novatests.cli import enqueue_ok, ok, rejected, write
from novatests.leases import commit, join

from nova_queue import TaskSpec


def test_a_second_cancel_says_nothing_was_left(invoke, tmp_path):
    job = enqueue_ok(invoke, write(tmp_path, b"a\nb\n"))
    first = ok(invoke("cancel", job)).stdout
    assert first.startswith(f"cancelled job {job}: 2 task(s) cancelled")
    second = ok(invoke("cancel", job)).stdout
    assert second.startswith(f"job {job} was already cancelled: nothing was left to cancel "
                             "(2 task(s) cancelled, 0 done, 0 still running")
    rejected(invoke("cancel", "nojob"), "unknown job nojob")


def test_owners_shows_no_queued_app_once_its_jobs_finished(invoke, nova, tmp_path):
    done = nova.enqueue("synthetic", [TaskSpec("a", 1.0)], owner="alice")
    cancelled = nova.enqueue("synthetic", [TaskSpec("b", 1.0)], owner="bob")
    nova.enqueue("synthetic", [TaskSpec("c", 1.0)], owner="carol")  # still queued
    join(nova, "w1")
    [lease] = nova.claim("w1", "synthetic").leases
    assert lease.job_id == done
    commit(nova, "w1", lease)
    nova.cancel(cancelled)
    out = ok(invoke("owners")).stdout
    rows = {line.split()[0]: line for line in out.splitlines() if line.split()[0] in
            ("alice", "bob", "carol")}
    assert rows["alice"].rstrip().endswith("idle      queued: -"), out
    assert "bob" not in rows, out  # no share, no usage, nothing queued: not an owner now
    assert rows["carol"].rstrip().endswith("queued: synthetic"), out
    listed = {o["owner"]: o["queued_apps"] for o in json.loads(ok(invoke("owners",
                                                                       "--json")).stdout)}
    assert listed.get("alice", []) == [] and listed.get("bob", []) == []
    assert listed["carol"] == ["synthetic"]


def test_a_purged_job_reads_purged_and_an_expired_one_expired(invoke, nova, tmp_path):
    purged = enqueue_ok(invoke, write(tmp_path, b"a\n"))
    ok(invoke("cancel", purged))
    ok(invoke("purge", purged))
    rejected(invoke("status", purged), f"job {purged} was purged ('nova-queue purge')")
    expired = enqueue_ok(invoke, write(tmp_path, b"b\n"), "--retention", "1")
    ok(invoke("cancel", expired))
    nova.redis.zadd(nova.keys.expiring(), {expired: 0})  # its retention ran out
    assert nova.expire()["jobs"] == 1
    rejected(invoke("status", expired), f"job {expired} expired: finished jobs leave Redis")
    rejected(invoke("status", "neverwas"), "unknown job neverwas")
    assert "its job purged" in str(_task_error(nova, f"{purged}:0"))


def _task_error(nova, tid):
    try:
        nova.task(tid)
    except Exception as exc:  # noqa: BLE001 - the message is what is checked
        return exc
    raise AssertionError("the task of a purged job was found")
