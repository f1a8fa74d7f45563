"""A job its only worker cannot prepare (issue 27): txt2img asked for a model outside that
worker's model roots. None of its 20 tasks fails, ``status`` says why it waits (worker by
worker, naming the fix), and it runs when a capable worker joins. Real worker processes,
the tiny random-weight model (a copy of it is the model the first worker may not load)."""

from __future__ import annotations

import json
import shutil

import pytest

pytest.importorskip("torch")
pytest.importorskip("diffusers")

from novatests.cli import nova_env, run_cli
from novatests.procs import WorkerProc

from nova_queue import NovaClient
from nova_queue.apps.registry import load_app
from nova_queue.local import wait_for

pytestmark = [pytest.mark.txt2img, pytest.mark.slow]


def handed_back(nova, job):
    """The job once its worker gave every task back and holds a mark for it."""
    st = nova.job(job, with_tasks=False)
    marked = [w for w in nova.workers() if w.alive and w.cannot_run]
    return st if marked and st.pending == st.total else None


def test_a_job_no_live_worker_can_prepare_waits_then_runs_on_a_capable_one(
        redis_url, namespace, tmp_path, tiny_model):
    elsewhere = tmp_path / "elsewhere" / "tiny"  # outside the first worker's model roots
    shutil.copytree(tiny_model, elsewhere)
    nova = NovaClient.from_url(redis_url, namespace=namespace)
    store_url = (tmp_path / "store").as_uri()
    env = {"HF_HUB_OFFLINE": "1"}
    procs = [WorkerProc(redis_url, namespace, store_url, tmp_path / "unable", "--app", "txt2img",
                        "-o", f"model={tiny_model}", env=env, name="unable")]
    try:
        wait_for(lambda: nova.eligible_workers("txt2img"), timeout_s=240, interval_s=0.2,
                 message="the first worker to join")
        app = load_app("txt2img")
        params = app.parse_params({"model": str(elsewhere), "width": "64", "height": "64"})
        job = nova.enqueue("txt2img", app.make_tasks([f"prompt {i}" for i in range(20)],
                                                     params), params=params,
                           model=app.model_key(params))
        st = wait_for(lambda: handed_back(nova, job), timeout_s=120, interval_s=0.1,
                      message="the job's tasks to be handed back")
        assert st.failed == 0 and st.done == 0, procs[0].output()[-3000:]
        assert max(t.attempt_count for t in nova.job(job).tasks) == 0  # no attempt used
        cli_env = nova_env(redis_url, namespace, tmp_path / "cli")
        text = run_cli(["status", job], cli_env).stdout
        assert "waiting: no live worker can run this job — unable: txt2img model" in text, text
        assert "is not available on this worker; to fix: start the worker with -o model=DIR" \
            in text
        data = json.loads(run_cli(["status", job, "--json"], cli_env).stdout)
        assert data["eligible_workers"] == 0 and [b["name"] for b in data["cannot_run"]] == [
            "unable"]
        assert data["waiting"].startswith("no live worker can run this job — unable: ")
        procs.append(WorkerProc(redis_url, namespace, store_url, tmp_path / "capable",
                                "--app", "txt2img", "-o", f"model={elsewhere}", env=env,
                                name="capable"))
        wait_for(lambda: nova.job(job, with_tasks=False).finished, timeout_s=300,
                 interval_s=0.2, message="the job to finish on the capable worker")
        st = nova.job(job)
        assert (st.state, st.done, st.failed) == ("done", 20, 0)
        assert {t.worker_name for t in st.tasks} == {"capable"}
        assert max(t.attempt_count for t in st.tasks) == 1
        assert "cannot prepare job" in procs[0].output()
    finally:
        for p in procs:
            p.close()
        nova.close()
