"""The txt2img runner on a CUDA or ROCm device, with the tiny random-weight model: fp16 chosen
and proven, valid images, and results that agree with the CPU's on every task (the premise
of verifying a GPU worker's results on a CPU worker and back). Skipped without a device;
``scripts/gpu-check`` runs this file with the GPU benchmarks."""

from __future__ import annotations

import dataclasses
import io
import itertools
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")
pytest.importorskip("imagehash")

from novatests.txt2img import cpu, job_params, make_inputs, runner
from PIL import Image

from nova_queue.apps import AppContext
from nova_queue.apps.image_checks import MAX_PHASH_DISTANCE, open_png, phash_distance
from nova_queue.apps.txt2img import Txt2ImgSpec
from nova_queue.workers.apps.txt2img_model import make_model
from nova_queue.workers.apps.txt2img_torch import fp16_self_check
from nova_queue.workers.backend import detect_backend

pytestmark = [
    pytest.mark.txt2img, pytest.mark.timeout(300),
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA/ROCm device"),
]

BACKEND = "rocm" if getattr(torch.version, "hip", None) else "cuda"
PROMPTS = ["a photograph of an astronaut riding a horse", "a red apple on a wooden table",
           "a lighthouse in a storm at night", "a bowl of ramen, studio lighting"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_model(tmp_path_factory.mktemp("txt2img-gpu") / "tiny")


def gpu(model_dir: Path, **options: str) -> AppContext:
    """The context of a GPU worker started with ``-o model=<model_dir>`` and ``options``."""
    return dataclasses.replace(cpu(model_dir, **options), backend=BACKEND, device="cuda:0",
                               device_name=torch.cuda.get_device_name(0))


def render(ctx: AppContext, params: dict, prompts: list[str], *, batch: int | None = None,
           job: str = "job-a") -> tuple[str, list]:
    """The runner's dtype and its outputs for ``prompts`` (``batch`` at a time; default all)."""
    app = runner()
    app.setup(ctx)
    try:
        app.prepare(params)
        inputs = make_inputs(params, prompts, job)
        step = batch or len(inputs)
        out = []
        for start in range(0, len(inputs), step):
            results = app.run_batch(inputs[start:start + step])
            assert not [r for r in results if isinstance(r, BaseException)], results
            for result in results:
                app.validate(result)  # not black, not one colour, the size asked for
            out += results
        return app.dtype_name, out
    finally:
        app.teardown()


def test_the_device_passes_its_self_test_and_reports_its_memory():
    info = detect_backend(BACKEND)
    assert (info.backend, info.device) == (BACKEND, "cuda:0") and info.selftest_ok
    assert info.device_name == torch.cuda.get_device_name(0)
    assert info.memory_total and info.memory_free and info.memory_free <= info.memory_total


def test_fp16_is_proven_and_chosen(model_dir: Path):
    assert fp16_self_check("cuda:0") is True
    dtype, results = render(gpu(model_dir), job_params(model_dir), PROMPTS[:2])
    assert dtype == "float16"
    for result in results:
        image = Image.open(io.BytesIO(result.data))
        assert image.size == (64, 64)
        assert image.text["backend"] == BACKEND and image.text["device"] == "cuda:0"
        assert image.text["dtype"] == "float16"


def test_gpu_and_cpu_agree_on_every_task_and_tell_seeds_apart(model_dir: Path):
    """Two seeds of each prompt: each task's GPU image (fp16, and fp32 by option) is within
    the threshold of the CPU's; another seed is far beyond it."""
    params, seeds = job_params(model_dir), [0, 1]
    prompts = [p for p in PROMPTS for _ in seeds]  # indices 0..7: task seeds differ
    _, on_cpu = render(cpu(model_dir), params, prompts)
    _, fp16 = render(gpu(model_dir), params, prompts)
    _, fp32 = render(gpu(model_dir, dtype="float32"), params, prompts)
    spec = Txt2ImgSpec()
    same = {name: [phash_distance(a.data, b.data) for a, b in zip(on_cpu, results)]
            for name, results in (("fp16", fp16), ("fp32", fp32))}
    others = [phash_distance(on_cpu[i].data, on_cpu[j].data)
              for i, j in itertools.combinations(range(len(prompts)), 2)
              if prompts[i] == prompts[j]]
    print(f"phash bits, {BACKEND} vs cpu: {same}; other seed: {others}")
    for name, distances in same.items():
        assert all(d is not None and d <= MAX_PHASH_DISTANCE for d in distances), (name, same)
    assert all(spec.same_result(a.data, b.data) for a, b in zip(on_cpu, fp16))
    assert min(others) > MAX_PHASH_DISTANCE, others
    assert not any(spec.same_result(on_cpu[i].data, on_cpu[i + 1].data)
                   for i in range(0, len(prompts), 2))
    assert {open_png(r.data).mode for r in on_cpu + fp16} == {"RGB"}


def test_a_batch_on_the_gpu_shows_what_single_runs_show(model_dir: Path):
    params, spec = job_params(model_dir), Txt2ImgSpec()
    _, batched = render(gpu(model_dir), params, PROMPTS)
    _, single = render(gpu(model_dir), params, PROMPTS, batch=1)
    assert all(spec.same_result(a.data, b.data) for a, b in zip(batched, single))
