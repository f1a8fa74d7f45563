"""The CLI as real processes (``python -m nova_queue ...``): prompt-file rules, stdin,
``enqueue --wait`` following a real ``worker --burst``, ``results``, backend refusal."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest
from cli_helpers import (
    BAD_PROMPT_FILES,
    background,
    error_line,
    namespace_keys,
    nova_env,
    run_cli,
)
from helpers import wait_for
from PIL import Image

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

    out = tmp_path / "results"
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
    summary = f"job {job.job_id} cancelled: 0 done, 0 failed, 3 cancelled of 3"
    assert lines == [job.job_id, summary]


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
