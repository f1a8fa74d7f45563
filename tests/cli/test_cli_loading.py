"""Nothing silent while a model loads, and ``enqueue --wait`` ends honestly: a real worker
serving an app whose model takes seconds to load (``slowload``, installed here as a
third-party app: a module and its dist-info on PYTHONPATH) logs the load and its progress,
``enqueue --wait`` shows "loading model on w1 (10 s)", and its last progress line and its
summary give the same time; Ctrl-C stops the waiting, not the job."""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

import pytest
from novatests.cli import background, nova_command, nova_env, process_env

from nova_queue.local import wait_for

APP = '''
import time
from nova_queue.apps import AppSpec, TaskOutput
from nova_queue.models import TaskSpec
from nova_queue.workers.apps import AppRunner


class SlowLoadSpec(AppSpec):
    name = "slowload"
    runner = "slowload_app:SlowLoadRunner"

    def parse_params(self, raw):
        return {"model": str(raw.get("model", "m0")), "load_s": float(raw.get("load_s", 0))}

    def make_tasks(self, prompts, params):
        return [TaskSpec(p, 1.0) for p in prompts]

    def model_key(self, params):
        return params["model"]


class SlowLoadRunner(AppRunner):
    model = None

    def setup(self, ctx):
        pass

    def prepare(self, params):  # loading a model takes load_s
        if params["model"] == self.model:
            return False
        time.sleep(params["load_s"])
        self.model = params["model"]
        return True

    def run_batch(self, tasks):
        return [TaskOutput(t.input.encode(), "text/plain", "txt") for t in tasks]

    def benchmark_task(self):
        return "bench", self.spec.parse_params({})
'''


@pytest.fixture
def app_env(redis_url, namespace, tmp_path) -> dict[str, str]:
    """The CLI's environment, with the slowload app installed (found by its entry point)."""
    site = tmp_path / "site"
    (site / "slowload-0.1.dist-info").mkdir(parents=True)
    (site / "slowload_app.py").write_text(APP)
    (site / "slowload-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: slowload\nVersion: 0.1\n")
    (site / "slowload-0.1.dist-info" / "entry_points.txt").write_text(
        "[nova_queue.apps]\nslowload = slowload_app:SlowLoadSpec\n")
    return nova_env(redis_url, namespace, tmp_path, PYTHONPATH=str(site))


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_wait_shows_the_model_loading_and_ends_with_one_time(app_env, nova, tmp_path):
    prompts = tmp_path / "p.txt"
    prompts.write_text("a\nb\n")
    with background(["worker", "--app", "slowload", "--no-benchmark", "--name", "loader"],
                    app_env, log_path=tmp_path / "worker.log") as worker:
        wait_for(lambda: nova.eligible_workers("slowload"), timeout_s=60,
                 message="the worker to join")
        with background(["enqueue", str(prompts), "--app", "slowload", "-p", "model=m1",
                         "-p", "load_s=15", "--wait"], app_env,
                        log_path=tmp_path / "wait.log") as waiter:
            out, _ = waiter.communicate(timeout=120)
        assert waiter.returncode == 0, (tmp_path / "wait.log").read_text()
        [w] = nova.workers()
        assert w.warm == {"slowload": "m1"} and w.model_loads == 1  # and loading no more
        assert not nova.redis.hexists(nova.keys.worker(w.worker_id), "loading:slowload")
        worker.send_signal(signal.SIGTERM)
        worker.wait(30)
    progress = [x for x in (tmp_path / "wait.log").read_text().splitlines()
                if x.startswith("progress:")]
    loading = [x for x in progress if re.search(r"; loading model on loader \(\d+ s\)$", x)]
    assert loading, progress  # said while it loaded, not 15 s of the same line
    summary = out.decode().strip().splitlines()[-1]
    last = re.search(r", ([\d.]+ s)$", progress[-1]).group(1)
    assert re.fullmatch(rf"job \w+ done in {re.escape(last)}: 2 done, 0 failed, 0 cancelled "
                        "of 2", summary), (progress[-1], summary)
    log = (tmp_path / "worker.log").read_text()
    assert "slowload: loading model m1 for job" in log
    assert re.search(r"slowload: still loading model m1 for job \w+ \(1\d s\)", log), log


@pytest.mark.timeout(90)
def test_ctrl_c_stops_the_waiting_not_the_job(app_env, nova, tmp_path):
    prompts = tmp_path / "p.txt"
    prompts.write_text("a\n")
    log = tmp_path / "wait.log"
    with open(log, "wb") as err:
        proc = subprocess.Popen(nova_command("enqueue", str(prompts), "--app", "synthetic",
                                             "--wait"), env=process_env(app_env),
                                stdout=subprocess.PIPE, stderr=err)
        try:
            wait_for(lambda: "progress: " in log.read_text(), timeout_s=60,
                     message="the first progress line")
            proc.send_signal(signal.SIGINT)
            out, _ = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    job = out.decode().split()[0]
    assert proc.returncode == 130
    last = log.read_text().strip().splitlines()[-1]
    assert re.fullmatch(rf"stopped waiting after \d+ s; job {job} keeps running — "
                        rf"`nova-queue status {job}`, `nova-queue cancel {job}`", last), last
    assert "aborted" not in log.read_text() and "Traceback" not in log.read_text()
    assert nova.job(job, with_tasks=False).state == "queued"  # it goes on
    assert Path(prompts).exists()
