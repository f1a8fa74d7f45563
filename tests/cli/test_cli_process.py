"""The CLI as real processes (``python -m nova_queue ...``): prompt-file rules, stdin, input
bounds, ``enqueue --wait`` following a real ``worker --burst`` (its progress piped and in a
terminal), ``results``, backend refusal, and the status of a job whose enqueue was killed."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from novatests.cli import (
    BAD_PROMPT_FILES,
    background,
    error_line,
    namespace_keys,
    nova_command,
    nova_env,
    process_env,
    run_cli,
    stop,
)
from PIL import Image

from nova_queue.local import wait_for

LOG_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (DEBUG|INFO) [\w.]+: ")


@pytest.fixture
def env(redis_url: str, namespace: str, tmp_path: Path) -> dict[str, str]:
    """This test's Redis, namespace, home and file store, as environment variables."""
    return nova_env(redis_url, namespace, tmp_path)


# ---- prompt files ----------------------------------------------------------------------------

@pytest.mark.parametrize("data, line, needle", [
    pytest.param(data, line, needle, id=name) for name, data, line, needle in BAD_PROMPT_FILES])
def test_bad_prompt_file_rejected(env, r, namespace, tmp_path, data, line, needle):
    path = tmp_path / "prompts.txt"
    path.write_bytes(data)
    res = run_cli(["enqueue", str(path), "--app", "synthetic"], env)
    assert (res.returncode, res.stdout) == (1, "")
    msg = error_line(res.stderr, needle)
    assert msg.startswith(f"error: {path}:{line}: " if line else f"error: {path}: "), msg
    assert namespace_keys(r, namespace) == []


def test_nul_byte_rejected_exact_line(env, r, namespace, tmp_path):
    path = tmp_path / "p.txt"
    path.write_bytes(b"one\nt\x00wo\n")
    res = run_cli(["enqueue", str(path), "--app", "synthetic", "--json"], env)
    assert (res.returncode, res.stdout) == (1, "")
    assert res.stderr == (f"error: {path}:2: NUL byte at offset 5; prompts files are UTF-8 "
                          "text, not binary\n")
    assert namespace_keys(r, namespace) == []


@pytest.mark.parametrize("make, needle", [
    pytest.param(lambda p: None, "no such file", id="missing"),
    pytest.param(lambda p: p.mkdir(), "directory", id="directory"),
])
def test_unusable_path_rejected(env, r, namespace, tmp_path, make, needle):
    path = tmp_path / "prompts"
    make(path)
    res = run_cli(["enqueue", str(path), "--app", "synthetic"], env)
    assert (res.returncode, res.stdout) == (1, "")
    assert error_line(res.stderr, needle).startswith(f"error: {path}: ")
    assert namespace_keys(r, namespace) == []


def test_enqueue_from_stdin(env, nova):
    data = "\ufeff  first \r\n# comment\r\n\r\nsecond\u2028same prompt\ncafé\n".encode()
    res = run_cli(["enqueue", "-", "--app", "synthetic", "--json"], env, stdin=data)
    assert res.returncode == 0, res.stderr
    job = nova.job(json.loads(res.stdout)["job_id"])
    assert [t.input for t in job.tasks] == ["first", "second\u2028same prompt", "café"]
    assert job.name == "stdin"


def test_bad_stdin_rejected(env, r, namespace):
    res = run_cli(["enqueue", "-", "--app", "synthetic"], env, stdin=b"fine\n\xff\n")
    assert (res.returncode, res.stdout) == (1, "")
    assert error_line(res.stderr, "UTF-8").startswith("error: <stdin>:2: ")
    assert namespace_keys(r, namespace) == []


def test_unreachable_redis_no_traceback_no_password(env, tmp_path):
    path = tmp_path / "p.txt"
    path.write_text("cat\n")
    res = run_cli(["--redis", "redis://:s3cret@127.0.0.1:1/0", "enqueue", str(path),
                   "--app", "synthetic"], env)
    assert (res.returncode, res.stdout) == (1, "")
    error_line(res.stderr, "cannot reach Redis", "redis://:***@127.0.0.1:1/0")
    assert "s3cret" not in res.stderr


# ---- a real worker ----------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.timeout(120)
def test_enqueue_wait_follows_a_real_worker_then_results(env, nova, tmp_path):
    prompts = ["a red fox", "café ✓", "left\u2028right"]
    json_file, text_file = tmp_path / "a.txt", tmp_path / "b.txt"
    json_file.write_text("# three prompts\n" + "\n".join(prompts) + "\n", encoding="utf-8")
    text_file.write_text("one\ntwo\nboom\n", encoding="utf-8")  # boom fails (crash_on)
    args = ["--app", "synthetic", "-p", "seconds=0.05", "--wait"]
    with background(["enqueue", str(json_file), *args, "--json"], env,
                    log_path=tmp_path / "wait-json.log") as waiter_json, \
         background(["enqueue", str(text_file), *args, "-p", "crash_on=boom",
                     "--max-attempts", "1"], env,
                    log_path=tmp_path / "wait-text.log") as waiter_text:
        jobs = wait_for(lambda: len(nova.jobs()) == 2 and nova.jobs(), timeout_s=30,
                        message="both jobs enqueued")
        assert waiter_json.poll() is None and waiter_text.poll() is None  # no worker yet
        with background(["worker", "--app", "synthetic", "--burst"], env,
                        log_path=tmp_path / "worker.log") as worker:
            out_json, _ = waiter_json.communicate(timeout=60)
            out_text, _ = waiter_text.communicate(timeout=60)
            assert worker.wait(timeout=30) == 0, (tmp_path / "worker.log").read_text()
    assert waiter_json.returncode == 0, (tmp_path / "wait-json.log").read_text()
    assert waiter_text.returncode == 1, (tmp_path / "wait-text.log").read_text()  # a failure

    final = json.loads(out_json)
    job_id = final["job_id"]
    assert job_id in {j.job_id for j in jobs}
    assert (final["state"], final["total"], final["done"], final["failed"], final["cancelled"],
            final["pending"], final["leased"]) == ("done", 3, 3, 0, 0, 0, 0)
    text_lines = out_text.decode().strip().split("\n")
    assert re.fullmatch(r"job (\w+) done in [\d.]+ s: 2 done, 1 failed, 0 cancelled of 3",
                        text_lines[-1]), text_lines
    assert text_lines[0] == text_lines[-1].split()[1] != job_id

    _check_status_and_worker(env, job_id, prompts)
    _check_results(env, job_id, tmp_path / "results")


def _check_status_and_worker(env, job_id: str, prompts: list[str]) -> None:
    """``status`` and ``workers`` as JSON after the run: each task done by the worker."""
    status = json.loads(run_cli(["status", job_id, "--json"], env).stdout)
    [w] = json.loads(run_cli(["workers", "--json"], env).stdout)
    assert [t["prompt"] for t in status["tasks"]] == prompts
    for t in status["tasks"]:
        assert (t["state"], t["worker"], t["worker_id"], t["backend"], t["lease_gen"],
                t["attempts"]) == ("done", w["name"], w["id"], "cpu", 1, 1)
        assert t["result"].startswith(f"jobs/{job_id}/results/") and t["result"].endswith(".png")
    assert (w["tasks_done"], w["failures"], w["alive"], w["backend"], w["apps"]) == (
        5, 1, False, "cpu", ["synthetic"])
    assert w["benchmark_s"] > 0 and w["ema_s"] > 0


def _check_results(env, job_id: str, out) -> None:
    """``results --out``: each task's PNG, with its job and index in its text chunks."""
    res = run_cli(["results", job_id, "--out", str(out)], env)
    assert res.returncode == 0, res.stderr
    assert "wrote 3 result(s)" in res.stdout
    assert sorted(p.name for p in out.iterdir()) == ["00000.png", "00001.png", "00002.png"]
    for i in range(3):
        with Image.open(out / f"{i:05d}.png") as img:
            img.verify()
        with Image.open(out / f"{i:05d}.png") as img:
            img.load()
            assert (img.format, img.size) == ("PNG", (256, 256))
            assert (img.text["job"], img.text["index"]) == (job_id, str(i))


@pytest.mark.timeout(60)
def test_enqueue_wait_ends_when_the_job_is_cancelled(env, nova, tmp_path):
    path = tmp_path / "p.txt"
    path.write_text("a\nb\nc\n")
    with background(["enqueue", str(path), "--app", "synthetic", "--wait"], env,
                    log_path=tmp_path / "wait.log") as waiter:
        [job] = wait_for(nova.jobs, timeout_s=30, message="job enqueued")
        res = run_cli(["cancel", job.job_id], env)
        assert res.returncode == 0, res.stderr
        out, _ = waiter.communicate(timeout=30)
    assert waiter.returncode == 1  # the job did not complete
    lines = out.decode().strip().split("\n")
    assert lines[0] == job.job_id and len(lines) == 2
    # the time counts from the enqueue, as its progress lines do
    assert re.fullmatch(rf"job {job.job_id} cancelled in [\d.]+ s: 0 done, 0 failed, "
                        "3 cancelled of 3", lines[1]), lines


def _has_gpu(kind: str) -> bool:
    if kind == "cuda":
        return bool(shutil.which("nvidia-smi")) or Path("/dev/nvidia0").exists()
    return sys.platform == "darwin"


@pytest.mark.slow
@pytest.mark.timeout(90)
@pytest.mark.parametrize("backend, needle", [("cuda", "CUDA"), ("mps", "MPS")])
def test_worker_refuses_a_backend_it_lacks(env, nova, backend, needle):
    if _has_gpu(backend):
        pytest.skip(f"this machine may have {backend}")
    res = run_cli(["worker", "--app", "synthetic", "--backend", backend, "--burst"], env,
                  timeout_s=60)
    assert res.returncode == 1 and res.stdout == "", res.stderr
    assert "Traceback" not in res.stderr
    lines = res.stderr.strip("\n").split("\n")
    errors = [ln for ln in lines if not LOG_RECORD.match(ln)]  # INFO logs may come first
    assert errors == [lines[-1]], res.stderr
    error_line(errors[0], f"backend '{backend}'", needle)
    assert nova.workers() == []  # refused before it registered


# ---- bounded input ------------------------------------------------------------------------------

@pytest.mark.timeout(60)
@pytest.mark.parametrize("make, needle", [
    pytest.param(lambda p: Path("/dev/zero"), "is a device", id="dev-zero"),
    pytest.param(lambda p: (os.mkfifo(p / "fifo"), p / "fifo")[1], "is a FIFO", id="fifo"),
])
def test_non_regular_files_refused_at_once(env, r, namespace, tmp_path, make, needle):
    path = make(tmp_path)
    res = run_cli(["enqueue", str(path), "--app", "synthetic"], env)
    assert (res.returncode, res.stdout) == (1, "")
    assert error_line(res.stderr, needle, "not a regular file").startswith(f"error: {path}: ")
    assert namespace_keys(r, namespace) == []


@pytest.mark.timeout(60)
def test_endless_stdin_is_cut_at_the_limit(env, r, namespace, tmp_path):
    with open("/dev/zero", "rb") as zero:
        proc = subprocess.run(nova_command("enqueue", "-", "--app", "synthetic"),
                              env=process_env(env), stdin=zero, capture_output=True,
                              timeout=50, check=False)
    assert (proc.returncode, proc.stdout) == (1, b"")
    error_line(proc.stderr.decode(), "<stdin>: has more than 67108864 bytes",
               "--max-bytes or NOVA_MAX_PROMPT_BYTES")
    assert namespace_keys(r, namespace) == []


def test_max_bytes_flag_and_env(env, r, namespace, tmp_path):
    path = tmp_path / "p.txt"
    path.write_bytes(b"cat\ndog\n")  # 8 bytes
    res = run_cli(["enqueue", str(path), "--app", "synthetic", "--max-bytes", "7"], env)
    error_line(res.stderr, f"{path}: is 8 bytes; the limit is 7 bytes")
    res = run_cli(["enqueue", "-", "--app", "synthetic"], {**env, "NOVA_MAX_PROMPT_BYTES": "7"},
                  stdin=b"cat\ndog\n")
    error_line(res.stderr, "<stdin>: has more than 7 bytes")
    assert namespace_keys(r, namespace) == []
    res = run_cli(["enqueue", str(path), "--app", "synthetic", "--max-bytes", "8"],
                  {**env, "NOVA_MAX_PROMPT_BYTES": "7"})  # the flag wins
    assert res.returncode == 0, res.stderr


# ---- what enqueue says -------------------------------------------------------------------------

def test_enqueue_prints_the_job_id_once(env, tmp_path):
    path = tmp_path / "p.txt"
    path.write_text("cat\n")
    res = run_cli(["enqueue", str(path), "--app", "synthetic"], env)
    assert res.returncode == 0, res.stderr
    job_id = res.stdout.strip()
    assert res.stdout == f"{job_id}\n"
    assert job_id not in res.stderr  # no INFO log repeating it
    assert res.stderr == ("warning: no live worker serves app 'synthetic' (no worker is live); "
                          "the job waits until one joins\n")


@pytest.mark.timeout(90)
def test_piped_wait_reports_progress_before_the_end(env, nova, tmp_path):
    path = tmp_path / "p.txt"
    path.write_text("a\nb\nc\n")
    log = tmp_path / "wait.log"
    with background(["enqueue", str(path), "--app", "synthetic", "--wait"], env,
                    log_path=log) as waiter:
        wait_for(lambda: "progress: " in log.read_text(), timeout_s=30,
                 message="a progress line while the job waits")
        assert waiter.poll() is None
        [job] = nova.jobs()
        assert run_cli(["cancel", job.job_id], env).returncode == 0
        out, _ = waiter.communicate(timeout=30)
    lines = log.read_text().strip().split("\n")
    assert lines[0] == ("warning: no live worker serves app 'synthetic' (no worker is live); "
                        "the job waits until one joins")
    assert lines[1].startswith("progress: 0/3 finished (0 done, 0 failed, 0 cancelled), "
                               "0 running, 3 pending, ")
    assert lines[1].endswith(" s; no live worker serves app 'synthetic'")
    assert lines[-2].startswith("progress: 3/3 finished (0 done, 0 failed, 3 cancelled), "
                                "0 running, 0 pending, ")
    assert lines[-1] == f"error: job {job.job_id} was cancelled (0 of 3 tasks done)"
    assert "\r" not in log.read_text()  # no bar redrawn into a file
    assert out.decode().split("\n")[0] == job.job_id


@pytest.mark.timeout(90)
def test_wait_in_a_terminal_draws_a_progress_bar(env, nova, tmp_path):
    path = tmp_path / "p.txt"
    path.write_text("a\nb\nc\n")
    master, slave = pty.openpty()
    proc = subprocess.Popen(nova_command("enqueue", str(path), "--app", "synthetic", "--wait"),
                            env=process_env(env), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    seen = b""
    try:
        deadline = time.monotonic() + 60
        while b"0/3" not in seen and time.monotonic() < deadline:
            if select.select([master], [], [], 0.5)[0]:
                seen += os.read(master, 4096)
        assert b"0/3" in seen and b"[" in seen, seen  # the bar: [-----]  0/3
        assert b"progress:" not in seen
        [job] = nova.jobs()
        assert run_cli(["cancel", job.job_id], env).returncode == 0
        proc.wait(timeout=30)
    finally:
        stop(proc)
        os.close(master)
    assert proc.returncode == 1  # cancelled


# ---- a staging job left by kill -9 -------------------------------------------------------------

@pytest.mark.slow  # writes and parses a million prompts: ~10 s
@pytest.mark.timeout(180)
def test_status_of_a_job_whose_enqueue_was_killed(env, nova, r, namespace, tmp_path):
    path = tmp_path / "million.txt"
    path.write_text("".join(f"p{i}\n" for i in range(1_000_000)))
    with background(["enqueue", str(path), "--app", "synthetic"], env,
                    log_path=tmp_path / "enqueue.log") as proc:
        [job_id] = wait_for(lambda: r.zrange(nova.keys.staging(), 0, -1), timeout_s=120,
                            interval_s=0.01, message="the first chunk staged")
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    try:
        assert r.hget(nova.keys.job(job_id), "state") == "staging"  # killed before publishing
        res = run_cli(["status", job_id], env)
        assert res.returncode == 0, res.stderr
        head, detail = res.stdout.strip().split("\n")
        assert head == f"job {job_id}  app synthetic  state staging  name 'million.txt'"
        assert re.match(r"  \d+ of 1000000 tasks written: being enqueued, or abandoned by a "
                        r"killed enqueue; reap deletes it 60 min after it was created", detail)
        st = json.loads(run_cli(["status", job_id, "--json"], env).stdout)
        assert (st["state"], st["total"]) == ("staging", 1000000) and 0 < st["staged"] < 1000000
    finally:
        for key in r.scan_iter(match=f"nova:{{{namespace}}}:*", count=10_000):
            r.unlink(key)
