"""What the CLI tells the operator: a job no live worker can run is named (enqueue, status,
``status --json``'s ``eligible_workers``), a staging job is shown as such, piped progress is
rate-limited, and stored text never reaches the terminal with its control characters."""

from __future__ import annotations

import dataclasses
import io
import json

import pytest
from novatests.cli import enqueue_ok, ok, rejected, status_json, write
from novatests.seed import FORGED_VALUES, expire_worker, forge_fields

from nova_queue.cli.text import UNSAFE, safe_json, visible
from nova_queue.cli.wait import LINE_EVERY_S, LINE_MIN_S, _Lines, summary
from nova_queue.client.worker import STAGING_ABANDONED_MS
from nova_queue.errors import JobNotFoundError
from nova_queue.models import TaskSpec

#: OSC retitle, CSI clear screen, an 8-bit CSI (C1), DEL and a right-to-left override.
EVIL = "a\x1b]0;pwned\x07b\x1b[2Jc\x9b31md\x7fe\u202ef"
EVIL_SHOWN = "a\\x1b]0;pwned\\x07b\\x1b[2Jc\\x9b31md\\x7fe\\u202ef"


def join(nova, wid: str, *apps: str, **fields: str) -> None:
    nova.register_worker(wid, {"name": wid, "backend": "cpu", **fields}, apps)


# ---- no live worker serves the app ---------------------------------------------------------

def test_enqueue_warns_when_no_live_worker_serves_the_app(invoke, nova, tmp_path):
    join(nova, "w1", "synthetic")
    join(nova, "w2", "synthetic")
    res = ok(invoke("enqueue", str(write(tmp_path, b"a cat\n")), "--app", "txt2img"))
    job_id = res.stdout.strip()
    assert res.stdout == f"{job_id}\n"
    assert res.stderr == ("warning: no live worker serves app 'txt2img' (live workers serve: "
                          "synthetic ×2); the job waits until one joins\n")
    assert nova.job(job_id).pending == 1  # enqueued all the same


def test_enqueue_names_an_empty_fleet(invoke, tmp_path):
    res = ok(invoke("enqueue", str(write(tmp_path, b"a\n")), "--app", "synthetic", "--json"))
    assert list(json.loads(res.stdout)) == ["job_id"]
    assert res.stderr == ("warning: no live worker serves app 'synthetic' (no worker is live); "
                          "the job waits until one joins\n")


def test_no_warning_when_a_live_worker_serves_it(invoke, nova, tmp_path):
    join(nova, "w1", "synthetic", "txt2img")
    res = ok(invoke("enqueue", str(write(tmp_path, b"a\n")), "--app", "synthetic"))
    assert res.stderr == ""


def test_a_worker_whose_heartbeat_ran_out_does_not_count(invoke, nova, tmp_path):
    join(nova, "w1", "synthetic")
    join(nova, "w2", "txt2img")
    expire_worker(nova, "w1")
    res = ok(invoke("enqueue", str(write(tmp_path, b"a\n")), "--app", "synthetic"))
    assert "no live worker serves app 'synthetic' (live workers serve: txt2img ×1)" in res.stderr


def test_status_says_so_and_json_counts_eligible_workers(invoke, nova, tmp_path):
    job_id = enqueue_ok(invoke, write(tmp_path, b"a\nb\n"))
    out = ok(invoke("status", job_id)).stdout
    assert ("  warning: no live worker serves app 'synthetic' (no worker is live); its tasks "
            "wait until one joins\n") in out
    assert status_json(invoke, job_id)["eligible_workers"] == 0
    join(nova, "w1", "synthetic")
    join(nova, "w2", "synthetic", "txt2img")
    join(nova, "w3", "txt2img")
    assert "warning" not in ok(invoke("status", job_id)).stdout
    assert status_json(invoke, job_id)["eligible_workers"] == 2


def test_a_finished_job_gets_no_warning(invoke, nova, tmp_path):
    job_id = enqueue_ok(invoke, write(tmp_path, b"a\n"))
    ok(invoke("cancel", job_id))
    assert "warning" not in ok(invoke("status", job_id)).stdout


# ---- a job still staging ----------------------------------------------------------------------

def stage_first_chunk(nova, job_id: str, total: int = 4) -> None:
    """Seed state: what a killed enqueue leaves, its first chunk written and never published."""
    k = nova.keys
    meta = json.dumps({"app": "synthetic", "params": "{}", "priority": 0, "max_attempts": 3,
                       "total": total, "name": "big.txt"})
    keys = [k.job(job_id), k.jobs(), k.staging(), k.stage(job_id), k.pending("synthetic"),
            k.seq(), k.events(), k.apps(), k.meta()]
    res = nova.scripts.call("enqueue", keys, [nova.prefix, job_id, 1, 0, meta, 0, 1000,
                                              "a", "1", "b", "1"])
    assert res[0] == 0


def test_status_of_a_staging_job(invoke, nova):
    stage_first_chunk(nova, "halfjob")
    res = ok(invoke("status", "halfjob"))
    head, detail = res.stdout.strip().split("\n")
    assert head == "job halfjob  app synthetic  state staging  name 'big.txt'"
    assert detail.startswith("  2 of 4 tasks written: being enqueued, or abandoned by a killed "
                             f"enqueue; reap deletes it {STAGING_ABANDONED_MS // 60_000} min "
                             "after it was created (")
    st = status_json(invoke, "halfjob")
    assert (st["state"], st["staged"], st["total"], st["tasks"]) == ("staging", 2, 4, [])
    assert st["reaped_after_ms"] == st["created_ms"] + STAGING_ABANDONED_MS
    # everything else still treats it as not there: the gallery, post-processing, claims
    with pytest.raises(JobNotFoundError):
        nova.job("halfjob")
    join(nova, "w1", "synthetic")
    assert nova.claim("w1", "synthetic", 1).leases == []
    rejected(invoke("status", "nojob"), "unknown job nojob")


# ---- progress lines when not a terminal --------------------------------------------------------

class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_piped_progress_lines_are_rate_limited(nova):
    job_id = nova.enqueue("synthetic", [TaskSpec("p")] * 20)
    st = nova.job(job_id, with_tasks=False)
    clock, out = FakeClock(), io.StringIO()
    lines = _Lines(nova, out, clock=clock)
    lines.show(st)  # at once, whatever happens next
    for done in range(1, 11):  # ten changes within LINE_MIN_S: none shown
        clock.now += LINE_MIN_S / 20
        lines.show(dataclasses.replace(st, done=done, pending=20 - done))
    clock.now += LINE_MIN_S
    lines.show(dataclasses.replace(st, done=11, pending=9))  # a change, after LINE_MIN_S
    clock.now += LINE_EVERY_S - 0.1
    lines.show(dataclasses.replace(st, done=11, pending=9))  # no change, not yet a heartbeat
    clock.now += 0.2
    lines.show(dataclasses.replace(st, done=11, pending=9))  # heartbeat
    shown = out.getvalue().splitlines()
    assert len(shown) == 3, shown
    assert shown[0] == ("progress: 0/20 finished (0 done, 0 failed, 0 cancelled), 0 running, "
                        "20 pending, 0 s; no live worker serves app 'synthetic'")
    assert shown[1].startswith("progress: 11/20 finished (11 done, ")
    assert shown[2].startswith("progress: 11/20 finished")
    assert shown[2].endswith(" s; no live worker serves app 'synthetic'")


# ---- control characters in stored text -------------------------------------------------------

def test_visible_escapes_every_control_and_bidi_character():
    assert visible(EVIL) == EVIL_SHOWN
    for code in UNSAFE:
        assert not set(visible(chr(code))) & {chr(c) for c in UNSAFE}
    assert visible("café ✓ 猫 🙂") == "café ✓ 猫 🙂"  # the rest stays readable
    doc = {"p": EVIL + "\u2066\u2069\u061c"}
    assert json.loads(safe_json(doc)) == doc
    assert not {chr(c) for c in UNSAFE} & set(safe_json(doc))


def assert_no_raw_controls(text: str) -> None:
    raw = {chr(c) for c in UNSAFE} - {"\n"}
    assert not raw & set(text), [hex(ord(c)) for c in raw & set(text)]


def test_status_shows_controls_in_prompts_and_names(invoke, nova, tmp_path):
    job_id = enqueue_ok(invoke, write(tmp_path, f"{EVIL}\n".encode()), "--name", EVIL)
    nova.register_worker("w1", {"name": "gpu\x1b]0;x\x07", "backend": "\u202e"},
                         ["synthetic"])
    nova.claim("w1", "synthetic", 1)
    out = ok(invoke("status", job_id)).stdout
    assert_no_raw_controls(out)
    assert f"name '{EVIL_SHOWN}'" in out and EVIL_SHOWN[:20] in out
    assert "gpu\\x1b]0;x\\x07" in out and " \\u202e " in out
    raw = ok(invoke("status", job_id, "--json")).stdout
    assert_no_raw_controls(raw)
    st = json.loads(raw)
    assert st["name"] == EVIL and st["tasks"][0]["prompt"] == EVIL


def test_status_shows_controls_in_job_fields_a_worker_can_write(invoke, nova, tmp_path):
    # the worker role may HSET any job field: its state and id are printed too
    job_id = enqueue_ok(invoke, write(tmp_path, b"a\n"))
    nova.redis.hset(nova.keys.job(job_id), mapping={"state": EVIL, "id": EVIL})
    out = ok(invoke("status", job_id)).stdout
    assert_no_raw_controls(out)
    assert out.startswith(f"job {EVIL_SHOWN}  app synthetic  state {EVIL_SHOWN}  name ")
    # enqueue --wait's last line, for a job whose fields were forged while it ran
    st = dataclasses.replace(nova.job(job_id, with_tasks=False), job_id=EVIL, state=EVIL)
    assert summary(st).startswith(f"job {EVIL_SHOWN} {EVIL_SHOWN}: 0 done")
    # a staging job's header as well
    stage_first_chunk(nova, "halfjob")
    nova.redis.hset(nova.keys.job("halfjob"), "id", EVIL)
    out = ok(invoke("status", "halfjob")).stdout
    assert_no_raw_controls(out)
    assert out.startswith(f"job {EVIL_SHOWN}  app synthetic  state staging  ")


@pytest.mark.parametrize("value", FORGED_VALUES)
def test_status_workers_and_results_survive_fields_forged_by_a_worker(invoke, nova, tmp_path,
                                                                      value):
    # a job's "done" set to "inf" was an OverflowError traceback in status and results
    job_id = enqueue_ok(invoke, write(tmp_path, b"a\nb\n"))
    join(nova, "w1", "synthetic")
    [lease] = nova.claim("w1", "synthetic", 1).leases
    nova.fail("w1", lease, "error", "boom")
    forge_fields(nova, value, job_ids=[job_id], worker_ids=["w1"])
    assert ok(invoke("status", job_id)).stdout.startswith(f"job {job_id}  app synthetic")
    assert status_json(invoke, job_id)["done"] == 0
    ok(invoke("workers"))
    ok(invoke("workers", "--json"))
    res = ok(invoke("results", job_id, "--out", str(tmp_path / "out")))
    assert res.stdout.startswith("wrote 0 result(s)")


def test_workers_shows_controls_in_worker_fields(invoke, nova):
    nova.register_worker("w1", {"name": "n\u202eame", "host": "box\x1b]0;owned\x07",
                                "host_id": "h1", "backend": "\x9b", "device": "RTX\x1b[2J"},
                         ["synthetic"])
    out = ok(invoke("workers")).stdout
    assert_no_raw_controls(out)
    assert "host box\\x1b]0;owned\\x07 (1 worker)" in out
    assert "n\\u202eame" in out and " \\x9b " in out and "RTX\\x1b[2J" in out
    raw = ok(invoke("workers", "--json")).stdout
    assert_no_raw_controls(raw)
    assert json.loads(raw)[0]["host"] == "box\x1b]0;owned\x07"


def test_error_lines_show_controls_too(invoke, tmp_path):
    path = tmp_path / "odd\x1b]0;x\x07name.txt"
    res = invoke("enqueue", str(path), "--app", "synthetic")
    msg = rejected(res, "no such file")
    assert "odd\\x1b]0;x\\x07name.txt" in msg
    assert_no_raw_controls(res.stderr)


def test_ids_read_from_redis_are_escaped_in_quarantine_and_tokens(invoke, nova):
    # a worker credential may HSET its record's id, and a token's worker field
    join(nova, "w1", "synthetic")
    nova.set_quarantine("w1", True, reason="by hand")
    nova.redis.hset(nova.keys.worker("w1"), "id", EVIL)
    out = ok(invoke("quarantine", "list")).stdout
    assert_no_raw_controls(out)
    assert out.startswith(f"w1 ({EVIL_SHOWN}) alive, probe in ")
    from nova_queue import tokens

    tokens.create(nova, "pc")
    digest = nova.redis.hget(nova.keys.tokens(), "pc")
    nova.redis.hset(nova.keys.token(digest), "worker", EVIL)
    res = ok(invoke("tokens", "revoke", "pc"))  # a forged worker field: no worker to stop
    assert res.stdout == "revoked token 'pc'\n"
    assert nova.redis.hget(nova.keys.tokens(), "pc") is None
