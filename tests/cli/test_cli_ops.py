"""The CLI of a long-running pool: ``enqueue --retention``, ``purge``, ``doctor``, and every
command refusing a namespace of another protocol version in one line."""

from __future__ import annotations

import json

import pytest
from novatests.cli import enqueue_ok, ok, rejected, write

from nova_queue import NovaClient
from nova_queue.stores import open_store


@pytest.fixture
def nova_cli(redis_url, namespace):
    client = NovaClient.from_url(redis_url, namespace=namespace)
    yield client
    client.close()


def finished_job(invoke, nova, tmp_path, n=2) -> str:
    job = enqueue_ok(invoke, write(tmp_path, b"a\nb\n"[: 2 * n]))
    nova.cancel(job)
    return job


def test_enqueue_retention_takes_units(invoke, nova_cli, tmp_path):
    job = enqueue_ok(invoke, write(tmp_path, b"a\n"), "--retention", "90m")
    assert nova_cli.redis.hget(nova_cli.keys.job(job), "retention_s") == "5400"
    default = enqueue_ok(invoke, write(tmp_path, b"a\n"))
    assert nova_cli.redis.hget(nova_cli.keys.job(default), "retention_s") == "604800"
    for bad in ("7x", "-1", "11000w"):
        res = invoke("enqueue", str(write(tmp_path, b"a\n")), "--app", "synthetic",
                     "--retention", bad)
        assert res.exit_code == 2 and "--retention" in res.output, res.output


def test_purge_a_job_then_status_says_purged(invoke, nova_cli, tmp_path):
    job = finished_job(invoke, nova_cli, tmp_path)
    res = ok(invoke("purge", job))
    assert res.stdout == f"purged {job}: 2 task(s)\n"
    rejected(invoke("status", job), f"job {job} was purged")
    rejected(invoke("purge", job), "was purged")
    rejected(invoke("cancel", job), "was purged")


def test_purge_refuses_a_running_job_and_deletes_nothing(invoke, nova_cli, tmp_path):
    done = finished_job(invoke, nova_cli, tmp_path)
    running = enqueue_ok(invoke, write(tmp_path, b"a\n"))
    rejected(invoke("purge", done, running), f"job {running} is queued", "nothing was deleted")
    assert nova_cli.job(done).state == "cancelled" and nova_cli.job(running).state == "queued"
    rejected(invoke("purge"), "JOB ids or --older-than")
    rejected(invoke("purge", done, "--older-than", "1d"), "JOB ids or --older-than")


def test_purge_older_than_with_dry_run_and_results(invoke, nova_cli, tmp_path):
    old, new = finished_job(invoke, nova_cli, tmp_path), finished_job(invoke, nova_cli, tmp_path)
    running = enqueue_ok(invoke, write(tmp_path, b"a\n"))
    nova_cli.redis.hset(nova_cli.keys.job(old), "finished_ms", 1000)  # finished long ago
    store = open_store((tmp_path / "store").as_uri())
    store.put(f"jobs/{old}/results/00000-g1-a.png", b"x", "image/png")
    store.put(f"jobs/{old}/manifest.json", b"{}", "application/json")
    store.put(f"jobs/{new}/results/00000-g1-a.png", b"x", "image/png")
    dry = ok(invoke("purge", "--older-than", "3d", "--dry-run"))
    assert dry.stdout == f"{old}\n" and nova_cli.job(old).total == 2
    res = json.loads(ok(invoke("purge", "--older-than", "3d", "--results", "--json")).stdout)
    assert res == {"purged": [{"job_id": old, "tasks": 2, "objects": 2}]}
    assert list(store.list(f"jobs/{old}/")) == [] and list(store.list(f"jobs/{new}/"))
    store.put(f"jobs/{old}/contact-sheet.png", b"x", "image/png")  # left over
    again = ok(invoke("purge", old, "--results"))  # gone from Redis: the store's rest goes
    assert again.stdout == f"purged {old}: 0 task(s), 1 object(s) of the store\n"
    ok(invoke("purge", "--older-than", "0"))
    rejected(invoke("status", new), "was purged")
    assert nova_cli.job(running).state == "queued"


#: An id a worker credential can plant in the retention index (ZADD) with a job hash of
#: its own (HSET): an OSC retitle, a screen clear and a right-to-left override.
PLANTED = "x\x1b]0;pwned\x07\x1b[2J\u202eevil"
PLANTED_SHOWN = "x\\x1b]0;pwned\\x07\\x1b[2J\\u202eevil"


def plant(nova, job_id: str, **fields) -> None:
    nova.redis.zadd(nova.keys.expiring(), {job_id: 1000})
    nova.redis.hset(nova.keys.job(job_id), mapping={"finished_ms": 1000, **fields})


def test_purge_escapes_ids_and_skips_what_is_not_a_finished_job(invoke, nova_cli, tmp_path):
    old = finished_job(invoke, nova_cli, tmp_path)
    nova_cli.redis.hset(nova_cli.keys.job(old), "finished_ms", 1000)
    plant(nova_cli, PLANTED)
    plant(nova_cli, "forged", state="running")  # a job id, but no finished job
    dry = ok(invoke("purge", "--older-than", "1d", "--dry-run"))
    for text in (dry.stdout, dry.stderr):
        assert not {"\x1b", "\x07", "\u202e"} & set(text), repr(text)
    assert sorted(dry.stdout.splitlines()) == sorted([old, "forged"])
    assert f"warning: skipped '{PLANTED_SHOWN}' in the retention index: not a job id" \
        in dry.stderr
    res = ok(invoke("purge", "--older-than", "1d"))  # not aborted by either
    assert not {"\x1b", "\x07", "\u202e"} & set(res.output)
    assert res.stdout == f"purged {old}: 2 task(s)\n"
    assert "warning: skipped job forged: job forged is running" in res.stderr
    assert "1 job(s) purged" in res.stderr
    rejected(invoke("status", old), "purged")
    as_json = json.loads(ok(invoke("purge", "--older-than", "1d", "--json")).stdout)
    assert as_json == {"purged": [], "skipped": [PLANTED]}


def test_doctor_reports_repairs_and_exits_by_what_remains(invoke, nova_cli, tmp_path):
    job = enqueue_ok(invoke, write(tmp_path, b"a\nb\n"))
    res = ok(invoke("doctor"))
    assert "1 jobs, 2 tasks, 0 workers (" in res.stdout.splitlines()[0]
    assert res.stdout.splitlines()[-1].startswith("ok, ")
    nova_cli.redis.zrem(nova_cli.keys.pending("synthetic"), f"{job}:1")
    broken = invoke("doctor")
    assert broken.exit_code == 1
    line = next(x for x in broken.stdout.splitlines() if x.startswith("problem"))
    assert f"task {job}:1 is pending but not in its pending set" in line
    assert nova_cli.keys.task(f"{job}:1") in line and nova_cli.keys.pending("synthetic") in line
    assert broken.stdout.splitlines()[-1].startswith("1 problem, ")
    report = json.loads(invoke("doctor", "--json").stdout)
    assert report["ok"] is False and report["problems"][0]["repairable"] is True
    fixed = ok(invoke("doctor", "--repair"))
    assert f"repaired: task {job}:1: requeued" in fixed.stdout
    assert nova_cli.redis.zscore(nova_cli.keys.pending("synthetic"), f"{job}:1") is not None


def test_every_command_refuses_another_protocol_but_doctor_reports_it(invoke, nova_cli,
                                                                      tmp_path):
    job = enqueue_ok(invoke, write(tmp_path, b"a\n"))
    nova_cli.redis.hset(nova_cli.keys.meta(), "protocol", "4")
    for args in (["status", job], ["workers"], ["cancel", job], ["purge", job],
                 ["enqueue", str(write(tmp_path, b"a\n")), "--app", "synthetic"]):
        rejected(invoke(*args), "speaks protocol 4", "speaks protocol 3",
                 "upgrade nova-queue here to a release that speaks protocol 4")
    res = invoke("doctor")
    assert res.exit_code == 1 and "speaks protocol '4'" in res.stdout
