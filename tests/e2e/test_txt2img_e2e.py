"""txt2img end to end on CPU: the tiny random-weight model through a real worker."""

from __future__ import annotations

import collections
import io
import os
import threading

import pytest

pytest.importorskip("torch")
pytest.importorskip("diffusers")

from novatests.procs import WorkerProc
from PIL import Image

from nova_queue import NovaClient
from nova_queue.apps.registry import load_app
from nova_queue.settings import Settings
from nova_queue.stores import open_store

pytestmark = [pytest.mark.txt2img, pytest.mark.slow]

PROMPTS = ["a red fox in snow", "日本の庭園", "<b>bold</b> & \"quoted\"", "a lighthouse",
           "🚀 launch", "a bowl of fruit"]


def enqueue(nova, model, prompts, **params):
    app = load_app("txt2img")
    parsed = app.parse_params({"model": str(model), "width": "64", "height": "64", **params})
    return nova.enqueue("txt2img", app.make_tasks(prompts, parsed), params=parsed)


def pixels(store, key):
    with Image.open(io.BytesIO(store.get(key).data)) as im:
        return im.size, im.convert("RGB").tobytes(), dict(im.text)


def test_prompts_to_images_through_a_real_worker(redis_url, namespace, tmp_path, tiny_model):
    nova = NovaClient.from_url(redis_url, namespace=namespace)
    store_url = (tmp_path / "store").as_uri()
    store = open_store(store_url)
    job_a = enqueue(nova, tiny_model, PROMPTS, seed="7", batch="3")
    job_b = enqueue(nova, tiny_model, PROMPTS, seed="7", batch="3")
    w = WorkerProc(redis_url, namespace, store_url, tmp_path / "home", "--app", "txt2img",
                   "-o", f"model={tiny_model}", "--burst",
                   env={"HF_HUB_OFFLINE": "1"}, name="cpu-txt2img")
    try:
        assert w.wait(240) == 0, w.output()[-3000:]
    finally:
        w.close()
    a, b = nova.job(job_a), nova.job(job_b)
    assert (a.state, a.done, b.done) == ("done", 6, 6)
    completed = collections.Counter((e.fields["job"], e.fields["task"])
                                    for e in nova.events(count=10000) if e.type == "completed")
    assert len(completed) == 12 and set(completed.values()) == {1}  # each task committed once
    claims = collections.Counter(e.id.split("-")[0] for e in nova.events(count=10000)
                                 if e.type == "claimed")
    assert max(claims.values()) == 3  # batches of 3 were claimed (and run) together
    for ta, tb in zip(a.tasks, b.tasks):
        size, data_a, text = pixels(store, ta.result)
        assert size == (64, 64)
        assert text["prompt"] == ta.input and text["job"] == job_a and text["task"] == ta.task_id
        assert text["backend"] == "cpu" and text["worker"] == "cpu-txt2img"
        assert text["seed"] == str((7 * 1_000_003 + ta.index) % 2**63)
        assert text["steps"] == "1" and text["model"] == str(tiny_model)
        assert "noise" in text.get("note", "")
        assert pixels(store, tb.result)[1] == data_a  # same seed -> identical image
        assert ta.backend == "cpu" and ta.meta.get("note")
    images = {pixels(store, t.result)[1] for t in a.tasks}
    assert len(images) == 6  # per-task seeds differ


def test_oom_inside_the_pipeline_is_classified_and_requeued(redis_url, namespace, tmp_path,
                                                            tiny_model):
    import torch

    from nova_queue.workers.runtime import Worker, WorkerOptions

    settings = Settings(redis_url=redis_url, namespace=namespace, home=str(tmp_path),
                        store_url=(tmp_path / "store").as_uri())
    nova = NovaClient.from_settings(settings)
    prompts = ["fine one", "OOM please", "fine two"]
    app = load_app("txt2img")
    parsed = app.parse_params({"model": str(tiny_model), "width": "64", "height": "64"})
    job = nova.enqueue("txt2img", app.make_tasks(prompts, parsed), params=parsed, max_attempts=2)
    worker = Worker(settings, WorkerOptions(apps=("txt2img",), burst=True, device_score_s=0,
                                            app_options={"model": str(tiny_model)}))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    worker.setup()
    txt2img = worker.apps["txt2img"].runner
    real_call = txt2img.pipe.__call__

    class FaultyPipe:  # the fault is injected at the pipeline boundary only
        def __getattr__(self, name):
            return getattr(txt2img.pipe_real, name)

        def __call__(self, prompt, **kw):
            if any("OOM" in p for p in prompt):
                raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB")
            return real_call(prompt=prompt, **kw)

    txt2img.pipe_real = txt2img.pipe
    txt2img.pipe = FaultyPipe()
    loop = threading.Thread(target=worker._loop)
    loop.start()
    loop.join(120)
    assert not loop.is_alive()
    worker._shutdown()
    st = nova.job(job)
    assert (st.state, st.done, st.failed) == ("done", 2, 1)
    bad = st.tasks[1]
    assert (bad.state, bad.error_kind, bad.attempt_count) == ("failed", "oom", 2)
    requeued = [e for e in nova.events(count=1000) if e.type == "requeued"]
    assert [(e.fields["kind"], e.fields["task"]) for e in requeued] == [("oom", "1")]
    assert int(nova.redis.hget(nova.keys.worker(worker.worker_id), "oom")) == 2
