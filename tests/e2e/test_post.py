"""RQ post-processing end to end: real workers, a real RQ post-worker process, both stores.

A job runs on a real ``nova-queue worker`` subprocess; ``nova-queue post-worker`` (RQ
``SimpleWorker``) then builds ``manifest.json``, ``contact-sheet.png`` and ``<job>.zip``
beside the results, and POSTs a webhook to a local HTTP server with RQ's retry.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from novatests.cli import nova_env, process_env
from novatests.webhook import Webhook
from PIL import Image
from rq import Queue
from rq.job import Job

from nova_queue import NovaClient, Settings, TaskSpec
from nova_queue.local import wait_for
from nova_queue.post.artifacts import MAX_SHEET_PX, MAX_TILES, build_artifacts, sheet_layout
from nova_queue.post.jobs import WEBHOOK_FUNC, build_job, register_context
from nova_queue.post.queue import build_job_id, dispatch, queue_name, webhook_job_id
from nova_queue.stores import ArtifactKeys, open_store

pytestmark = pytest.mark.slow

PROMPTS = ["a red fox", "a blue whale", "poison pill here", "a green frog", "a tiny moon"]


# ---- fixtures and helpers ----------------------------------------------------------------

@pytest.fixture(params=["file", "s3"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The file store in tmp_path, or a fresh bucket on the session's S3 server."""
    if request.param == "s3":
        return request.getfixturevalue("s3_store_url")
    return (tmp_path / "store").as_uri()


@pytest.fixture
def env(redis_url: str, namespace: str, tmp_path: Path) -> dict[str, str]:
    return process_env(nova_env(redis_url, namespace, tmp_path))


@pytest.fixture
def client(redis_url: str, namespace: str) -> Iterator[NovaClient]:
    c = NovaClient.from_url(redis_url, namespace=namespace)
    yield c
    c.close()


@pytest.fixture
def rq_conn(redis_url: str) -> Iterator[redis.Redis]:
    conn = redis.Redis.from_url(redis_url)
    yield conn
    conn.close()


def nova(env: dict[str, str], *args: str, timeout_s: float = 120) -> subprocess.CompletedProcess:
    """Run ``python -m nova_queue ARGS`` to completion; fail with its output if it fails."""
    proc = subprocess.run([sys.executable, "-m", "nova_queue", *args], env=env, check=False,
                          capture_output=True, text=True, timeout=timeout_s)
    assert proc.returncode == 0, f"{args} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc


def run_job(client: NovaClient, env: dict[str, str], prompts: list[str] = PROMPTS,
            **params: str) -> str:
    """Enqueue a synthetic job and run it to the end on a real worker process."""
    job = client.enqueue("synthetic", [TaskSpec(p, 0.01) for p in prompts],
                         params={"seconds": "0.01", "size": "64", **params}, max_attempts=1)
    nova(env, "worker", "--app", "synthetic", "--burst", "--no-benchmark", "--name", "w-cpu")
    st = client.job(job)
    assert st.state == "done", st
    return job


def post_burst(env: dict[str, str], timeout_s: float = 60) -> subprocess.CompletedProcess:
    return nova(env, "post-worker", "--burst", timeout_s=timeout_s)


def in_outbox(client: NovaClient, job: str) -> bool:
    return client.redis.zscore(client.keys.finished(), job) is not None


@pytest.fixture
def webhook() -> Iterator[type[Webhook]]:
    made: list[Webhook] = []

    def make(statuses: list[int]) -> Webhook:
        made.append(Webhook(statuses))
        return made[-1]

    yield make  # type: ignore[misc]
    for w in made:
        w.close()


# ---- the finalizer end to end ------------------------------------------------------------

def test_artifacts_end_to_end(client, env, store_url, tmp_path):
    # the s3 fixture puts its credentials in os.environ, possibly after `env` was built
    aws = {k: v for k, v in os.environ.items() if k.startswith("AWS_")}
    env = {**env, **aws, "NOVA_STORE_URL": store_url}
    job = run_job(client, env, prompts=PROMPTS[:2] + PROMPTS[3:])
    assert in_outbox(client, job)
    # workers never touch RQ: the post-worker is its only producer
    rq_conn = redis.Redis.from_url(env["NOVA_REDIS_URL"])
    assert not Job.exists(build_job_id(client.settings.namespace, job), connection=rq_conn)
    rq_conn.close()
    out = post_burst(env)
    assert "built artifacts of job" in out.stderr + out.stdout
    assert not in_outbox(client, job)

    store = open_store(store_url)
    keys = ArtifactKeys.for_job(job)
    tasks = client.tasks(job)
    manifest = json.loads(store.get(keys.manifest).data)
    _check_manifest(manifest, job, keys, tasks)
    sheet = store.get(keys.contact_sheet)
    _check_contact_sheet(sheet, store, tasks)

    with zipfile.ZipFile(io.BytesIO(store.get(keys.zip).data)) as zf:
        assert sorted(zf.namelist()) == sorted(
            [f"results/{t.index:05d}.png" for t in tasks] + ["manifest.json"])
        for t in tasks:
            assert zf.read(f"results/{t.index:05d}.png") == store.get(t.result).data
        assert json.loads(zf.read("manifest.json")) == manifest

    # `nova-queue results` brings the artifacts down too
    dest = tmp_path / "download"
    nova(env, "results", job, "--out", str(dest))
    assert (dest / "manifest.json").read_bytes() == store.get(keys.manifest).data
    assert (dest / "contact-sheet.png").read_bytes() == sheet.data
    assert (dest / f"{job}.zip").read_bytes() == store.get(keys.zip).data
    assert len(list(dest.glob("0000*.png"))) == len(tasks)


def _check_manifest(manifest: dict, job: str, keys: ArtifactKeys, tasks: list) -> None:
    """The manifest names the job, its artifacts and each task as the client sees it."""
    assert manifest["job"]["job_id"] == job and manifest["job"]["state"] == "done"
    assert manifest["artifacts"] == keys.to_json()
    assert [t["index"] for t in manifest["tasks"]] == list(range(len(tasks)))
    for entry, t in zip(manifest["tasks"], tasks):
        assert entry["state"] == "done" and entry["prompt"] == t.input
        assert entry["worker"] == "w-cpu" and entry["worker_id"] == t.worker_id
        assert entry["backend"] == "cpu" and entry["host"] == t.host
        assert entry["result"] == t.result and entry["result"].startswith(f"jobs/{job}/results/")
        assert entry["attempts"] == 1 and entry["lease_gen"] == t.lease_gen
        assert entry["timings"]["run_s"] == t.run_s and entry["timings"]["finished_ms"]
        assert entry["file"] == f"results/{t.index:05d}.png"


def _check_contact_sheet(sheet, store, tasks: list) -> None:
    """A PNG of one tile per task; the first tile shows the first result's card."""
    assert sheet.content_type == "image/png"
    layout = sheet_layout(len(tasks))
    with Image.open(io.BytesIO(sheet.data)) as im:
        assert im.format == "PNG" and im.size == (layout.width, layout.height)
        # the first tile shows the first result's card (64 px: pasted unscaled, centred)
        x, y = layout.tile_origin(0)
        with Image.open(io.BytesIO(store.get(tasks[0].result).data)) as card:
            off = (layout.tile_px - card.width) // 2
            pasted = im.convert("RGB").crop((x + off, y + off, x + off + card.width,
                                             y + off + card.height))
            assert pasted.tobytes() == card.convert("RGB").tobytes()


def test_poison_task_job_still_gets_artifacts(client, env, tmp_path):
    # the poison task runs last, so the fail path finishes the job
    prompts = [p for p in PROMPTS if "poison" not in p] + ["poison pill here"]
    job = run_job(client, env, prompts=prompts, crash_on="poison")
    st = client.job(job)
    assert (st.done, st.failed) == (4, 1) and in_outbox(client, job)
    post_burst(env)
    store = open_store(env["NOVA_STORE_URL"])
    keys = ArtifactKeys.for_job(job)
    manifest = json.loads(store.get(keys.manifest).data)
    failed = [t for t in manifest["tasks"] if t["state"] == "failed"]
    assert len(failed) == 1 and failed[0]["index"] == 4
    assert "PoisonTaskError" in failed[0]["error"] and failed[0]["error_kind"] == "error"
    assert failed[0]["result"] is None and failed[0]["file"] is None
    assert failed[0]["worker"] == "w-cpu"  # the worker it failed on, by name
    with zipfile.ZipFile(io.BytesIO(store.get(keys.zip).data)) as zf:
        assert len([n for n in zf.namelist() if n.startswith("results/")]) == 4
    with Image.open(io.BytesIO(store.get(keys.contact_sheet).data)) as im:
        assert im.size == (sheet_layout(5).width, sheet_layout(5).height)


def test_webhook_is_retried_by_rq(client, env, webhook, rq_conn, namespace):
    hook = webhook([500, 200])
    env = {**env, "NOVA_WEBHOOK_URL": hook.url}
    job = run_job(client, env, prompts=PROMPTS[:2])
    finished_ms = int(client.redis.zscore(client.keys.finished(), job))
    post_burst(env)  # waits for the scheduled retry of its own queue
    assert len(hook.received) == 2, hook.received
    assert hook.received[0] == hook.received[1]
    body = hook.received[0]
    assert body["job_id"] == job and body["state"] == "done" and body["event"] == "job.finished"
    assert body["counts"] == {"total": 2, "done": 2, "failed": 0, "cancelled": 0}
    assert body["artifacts"] == ArtifactKeys.for_job(job).to_json()
    rq_job = Job.fetch(webhook_job_id(namespace, job, finished_ms), connection=rq_conn)
    assert rq_job.get_status() == "finished" and rq_job.retries_left == 2
    # secrets stay out of RQ: the arguments are ids only
    assert rq_job.args == (namespace, job, finished_ms)


def test_duplicate_dispatch_is_harmless(client, env, webhook, rq_conn, namespace, redis_url):
    hook = webhook([])
    env = {**env, "NOVA_WEBHOOK_URL": hook.url}
    job = run_job(client, env, prompts=PROMPTS[:2])
    queue = Queue(queue_name(namespace), connection=rq_conn)
    assert dispatch(client, job) is True  # workers never dispatch: this queues it
    assert dispatch(client, job) is False
    assert queue.job_ids == [build_job_id(namespace, job)]
    post_burst(env)
    assert not in_outbox(client, job) and len(hook.received) == 1
    store = open_store(env["NOVA_STORE_URL"])
    keys = ArtifactKeys.for_job(job)
    first = {k: store.get(k).data for k in keys.to_json().values()}
    # nothing to dispatch once processed; a stray build job is a no-op
    assert dispatch(client, job) is False
    register_context(Settings(redis_url=redis_url, namespace=namespace,
                              store_url=env["NOVA_STORE_URL"], webhook_url=hook.url))
    assert build_job(namespace, job)["skipped"]
    # a crash between building and clearing the outbox: the rebuild is identical and the
    # webhook of that finish is not sent again
    client.redis.zadd(client.keys.finished(), {job: client.job(job).finished_ms})
    assert dispatch(client, job) is True
    post_burst(env)
    assert not in_outbox(client, job)
    assert {k: store.get(k).data for k in keys.to_json().values()} == first
    assert len(hook.received) == 1


def start_post_worker(env: dict[str, str], log_path: Path, *args: str) -> subprocess.Popen:
    """``nova-queue post-worker ARGS`` in the background, once RQ's worker listens."""
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "nova_queue", "post-worker", *args],
                                env=env, stdout=log, stderr=subprocess.STDOUT)
    wait_for(lambda: b"Listening on" in log_path.read_bytes() or proc.poll() is not None,
             timeout_s=30, message="the post-worker to listen")
    assert proc.poll() is None, log_path.read_text()
    return proc


def stop_post_worker(proc: subprocess.Popen, log_path: Path) -> None:
    """SIGTERM; the exit code must be 0 (a kill only if the test already failed)."""
    try:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0, log_path.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_post_worker_builds_as_jobs_finish_and_stops_on_sigterm(client, env, tmp_path):
    """Jobs are dispatched at their job_finished event: with sweeps an hour apart, only the
    event stream can have told the post-worker about jobs finished after it started."""
    log_path = tmp_path / "post.log"
    proc = start_post_worker(env, log_path, "--sweep-interval-s", "3600")
    try:
        store = open_store(env["NOVA_STORE_URL"])
        # the second job's last task fails: the fail path finishes it
        for prompts in (PROMPTS[:2], PROMPTS[:3]):
            job = run_job(client, env, prompts=prompts, crash_on="poison")
            wait_for(lambda j=job: store.exists(ArtifactKeys.for_job(j).zip) and
                     not in_outbox(client, j), timeout_s=30, message="the artifacts")
    finally:
        stop_post_worker(proc, log_path)
    assert log_path.read_text().count("queued post-processing of job") == 2


def test_post_worker_sweep_finds_what_no_event_announced(client, env, tmp_path):
    """The outbox is the source of truth: a job finished before the post-worker started, and
    an outbox entry written without an event, are found by the sweeps."""
    store = open_store(env["NOVA_STORE_URL"])
    job = run_job(client, env, prompts=PROMPTS[:2])
    log_path = tmp_path / "post.log"
    proc = start_post_worker(env, log_path, "--sweep-interval-s", "0.2")
    try:
        keys = ArtifactKeys.for_job(job)
        wait_for(lambda: store.exists(keys.zip) and not in_outbox(client, job), timeout_s=30,
                 message="the artifacts of the job finished before the start")
        for key in keys.to_json().values():
            store.delete(key)
        # as after a crash between building and clearing the outbox: no job_finished event
        client.redis.zadd(client.keys.finished(), {job: client.job(job).finished_ms})
        wait_for(lambda: store.exists(keys.zip) and not in_outbox(client, job), timeout_s=30,
                 message="the periodic sweep to rebuild the artifacts")
    finally:
        stop_post_worker(proc, log_path)


# ---- bounded contact sheets --------------------------------------------------------------

@pytest.mark.parametrize("total", [1, 2, 7, 1000, 1500, 12_000, 100_000])
def test_sheet_layout_stays_bounded(total):
    layout = sheet_layout(total)
    assert layout.width <= MAX_SHEET_PX and layout.height <= MAX_SHEET_PX
    assert layout.shown == min(total, MAX_TILES) and layout.cols * layout.rows >= layout.shown
    assert layout.caption_px == 0 or layout.tile_px >= 96


def test_big_job_sheet_is_bounded(client, env):
    job = client.enqueue("synthetic", [TaskSpec(f"prompt {i}", 0.001) for i in range(1500)],
                         params={"seconds": "0", "size": "64"})
    nova(env, "worker", "--app", "synthetic", "--burst", "--no-benchmark", "--max-tasks", "30")
    client.cancel(job)
    wait_for(lambda: client.job(job, with_tasks=False).finished, timeout_s=10,
             message="the cancelled job to settle")
    store = open_store(env["NOVA_STORE_URL"])
    keys = build_artifacts(client, store, job)
    layout = sheet_layout(1500)
    with Image.open(io.BytesIO(store.get(keys.contact_sheet).data)) as im:
        assert im.size == (layout.width, layout.height)
        assert max(im.size) <= MAX_SHEET_PX
    manifest = json.loads(store.get(keys.manifest).data)
    assert len(manifest["tasks"]) == 1500
    assert sum(t["state"] == "done" for t in manifest["tasks"]) == 30
    with zipfile.ZipFile(io.BytesIO(store.get(keys.zip).data)) as zf:
        assert len(zf.namelist()) == 31


def test_burst_exits_1_when_a_post_job_fails_for_good(client, env, rq_conn, namespace):
    job = run_job(client, env, prompts=PROMPTS[:1])
    post_burst(env)  # builds the artifacts: exit 0
    # a webhook job without retries, aimed at a closed port: it fails at once
    Queue(queue_name(namespace), connection=rq_conn).enqueue_call(
        WEBHOOK_FUNC, args=(namespace, job, 0))
    proc = subprocess.run(
        [sys.executable, "-m", "nova_queue", "post-worker", "--burst"], check=False,
        env={**env, "NOVA_WEBHOOK_URL": "http://127.0.0.1:1/hook"}, capture_output=True,
        text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert "failed for good" in proc.stderr and "unreachable" in proc.stderr + proc.stdout


def test_rq_jobs_queued_under_the_old_function_names_still_resolve():
    """RQ jobs queued before post-processing became a package name nova_queue.post.build_job
    and nova_queue.post.webhook_job; an upgraded post-worker must still run them."""
    from rq.utils import import_attribute

    from nova_queue.post import jobs

    assert import_attribute("nova_queue.post.build_job") is jobs.build_job
    assert import_attribute("nova_queue.post.webhook_job") is jobs.webhook_job


def test_rq_teardown_does_not_wait_out_the_listeners_sleep(redis_url, namespace):
    """RQ's teardown unsubscribes, then joins its command listener with no time limit. A
    listener that read the unsubscribe reply before the stop used to wait for a new
    subscription for RQ's whole 60 s sleep: a burst run hung past its work on a busy
    machine. Here that order is forced: the reply is read first, then the teardown runs."""
    from nova_queue.post.worker import PUBSUB_WAKE_S, PostWorker

    post = PostWorker(Settings(redis_url=redis_url, namespace=namespace))
    worker = post.worker
    worker.subscribe()
    try:
        wait_for(lambda: worker.pubsub.subscribed, timeout_s=30, message="the subscription")
        worker.pubsub.unsubscribe()
        wait_for(lambda: not worker.pubsub.subscribed, timeout_s=30,
                 message="the listener to read the unsubscribe reply")
        done = threading.Event()
        threading.Thread(target=lambda: (worker.unsubscribe(), done.set()), daemon=True).start()
        # RQ's listener would sleep 60 s here; ours wakes within PUBSUB_WAKE_S (plenty of
        # room for a busy machine, far from 60 s)
        assert done.wait(PUBSUB_WAKE_S + 20), "RQ's teardown waited out the listener's sleep"
        assert not worker.pubsub_thread.is_alive()
    finally:
        post.ctx.rq.close()
        post.ctx.client.close()
