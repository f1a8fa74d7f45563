"""The txt2img app end to end on CPU, with a tiny random-weight model built once per module."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")
pytest.importorskip("transformers")

import numpy as np
from novatests.txt2img import CPU, cpu, job_params, make_inputs, runner
from PIL import Image

from nova_queue.apps import AppContext, load_app
from nova_queue.apps.txt2img import Txt2ImgSpec
from nova_queue.apps.txt2img_params import (
    parse_params,
    task_seed,
)
from nova_queue.errors import AppError, ModelNotFoundError
from nova_queue.workers.apps import load_worker_app
from nova_queue.workers.apps.txt2img import BENCHMARK_PROMPT, Txt2ImgRunner
from nova_queue.workers.apps.txt2img_model import (
    MARKER_FILE,
    RANDOM_NOTE,
    make_model,
    text_encoder_config,
    tokenizer_files,
    unet_config,
    vae_config,
)
from nova_queue.workers.apps.txt2img_source import is_hub_id, model_roots
from nova_queue.workers.apps.txt2img_torch import fp16_self_check

pytestmark = [pytest.mark.txt2img, pytest.mark.timeout(120)]

GIB = 2**30


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_model(tmp_path_factory.mktemp("txt2img") / "tiny")


@pytest.fixture(scope="module")
def app(model_dir: Path):
    app = runner()
    app.setup(cpu(model_dir))
    yield app
    app.teardown()




def pixels(data: bytes) -> torch.Tensor:
    return torch.from_numpy(np.array(Image.open(io.BytesIO(data)).convert("RGB"))).int()


@pytest.fixture
def pipeline_calls(app: Txt2ImgRunner, model_dir: Path, monkeypatch: pytest.MonkeyPatch):
    """Batch sizes the loaded pipeline's ``__call__`` saw; ``fail_above`` injects an OOM."""
    app.prepare(job_params(model_dir))
    cls = type(app.pipe)
    original = cls.__call__
    calls: list[int] = []
    state = {"fail_above": None}

    def wrapped(self, *args, **kwargs):
        calls.append(len(kwargs["prompt"]))
        if state["fail_above"] is not None and len(kwargs["prompt"]) > state["fail_above"]:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(cls, "__call__", wrapped)
    return calls, state


# -- imports and the runner's params ----------------------------------------------------------------

def test_importing_the_app_does_not_import_torch_or_diffusers():
    code = ("import sys, nova_queue.apps.txt2img, nova_queue.workers.apps.txt2img, "
            "nova_queue.workers.apps.txt2img_model; "
            "print(sorted(m for m in ('torch', 'diffusers', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_registry_loads_the_spec_and_the_worker_its_runner():
    assert isinstance(load_app("txt2img"), Txt2ImgSpec)
    app = load_worker_app("txt2img")
    assert isinstance(app.runner, Txt2ImgRunner) and app.runner.spec is app.spec


def test_batch_param_overrides_and_fp32_halves_gpu_batches():
    app = runner()
    app.setup(AppContext("cuda", "cuda:0", "GPU", "w", "w", memory_total=80 * GIB,
                         memory_free=70 * GIB, options={"dtype": "float32"}))
    assert app.batch_size(parse_params({})) == 4
    assert app.batch_size(parse_params({"batch": "3"})) == 3


def test_fp16_self_check_passes_on_cpu():
    assert fp16_self_check("cpu") is True


# -- the random-weight model -----------------------------------------------------------------

def test_random_model_folder(model_dir: Path):
    index = json.loads((model_dir / "model_index.json").read_text())
    assert index["_class_name"] == "StableDiffusionPipeline"
    assert index["requires_safety_checker"] is False and index["safety_checker"] == [None, None]
    scheduler = json.loads((model_dir / "scheduler" / "scheduler_config.json").read_text())
    assert scheduler["_class_name"] == "EulerDiscreteScheduler"
    assert scheduler["timestep_spacing"] == "trailing"
    assert "noise" in (model_dir / MARKER_FILE).read_text()
    assert (model_dir / "README.txt").is_file() and (model_dir / "tokenizer/merges.txt").is_file()


def test_tokenizer_takes_any_prompt(app: Txt2ImgRunner, model_dir: Path):
    app.prepare(job_params(model_dir))
    tok = app.pipe.tokenizer
    vocab, _ = tokenizer_files()
    for prompt in ["a photograph of an astronaut", "Café naïve 東京 🚀 \u200b", "", "word " * 200]:
        ids = tok(prompt, padding="max_length", max_length=77, truncation=True).input_ids
        assert len(ids) == 77 and max(ids) < len(vocab)
        assert vocab["<|endoftext|>"] in ids
    assert len(tok("photograph").input_ids) == 3  # bos, one merged word, eos


def test_make_model_is_seeded_and_rewrites_its_own_folder(tmp_path: Path):
    weights = Path("unet") / "diffusion_pytorch_model.safetensors"
    first = (make_model(tmp_path / "m", seed=1) / weights).read_bytes()
    assert (make_model(tmp_path / "m", seed=1) / weights).read_bytes() == first
    assert (make_model(tmp_path / "m", seed=2) / weights).read_bytes() != first


def test_make_model_refuses_a_foreign_folder(tmp_path: Path):
    (tmp_path / "precious.txt").write_text("keep me")
    with pytest.raises(AppError, match="refusing to overwrite"):
        make_model(tmp_path)
    assert (tmp_path / "precious.txt").read_text() == "keep me"


def test_full_size_configs_match_sd_turbo():
    unet, vae, text = unet_config(True), vae_config(True), text_encoder_config(True)
    assert unet["block_out_channels"] == (320, 640, 1280, 1280)
    assert unet["attention_head_dim"] == (5, 10, 20, 20)
    assert unet["cross_attention_dim"] == 1024 and unet["use_linear_projection"] is True
    assert vae["block_out_channels"] == (128, 256, 512, 512)
    assert (text["hidden_size"], text["num_hidden_layers"], text["num_attention_heads"],
            text["intermediate_size"], text["projection_dim"], text["hidden_act"],
            text["vocab_size"]) == (1024, 23, 16, 4096, 512, "gelu", 49408)
    from diffusers import AutoencoderKL, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel

    with torch.device("meta"):  # shapes only: no memory, no time
        counts = [sum(p.numel() for p in m.parameters()) for m in (
            UNet2DConditionModel(**unet), AutoencoderKL(**vae),
            CLIPTextModel(CLIPTextConfig(**text)))]
    assert counts[0] == 865_910_724  # SD 2.x UNet
    assert 83e6 < counts[1] < 84e6 and 340e6 < counts[2] < 341e6


# -- loading ---------------------------------------------------------------------------------

def test_prepare_loads_once(model_dir: Path):
    app = runner()
    app.setup(cpu(model_dir))
    assert app.prepare(job_params(model_dir)) is True
    assert app.last_load_s is not None and app.last_load_s > 0
    assert app.prepare(job_params(model_dir, seed="5", width="128")) is False
    assert app.pipe.safety_checker is None
    processors = {type(p).__name__ for p in app.pipe.unet.attn_processors.values()}
    assert "SlicedAttnProcessor" not in processors  # auto: off on cpu
    assert app.prepare(job_params(model_dir, attention_slicing="on")) is False
    processors = {type(p).__name__ for p in app.pipe.unet.attn_processors.values()}
    assert processors == {"SlicedAttnProcessor"}
    app.teardown()
    assert app.pipe is None


def test_compile_param_wraps_the_unet(model_dir: Path):
    app = runner()
    app.setup(cpu(model_dir))
    app.prepare(job_params(model_dir))
    assert app.prepare(job_params(model_dir, compile="true")) is True
    assert type(app.pipe.unet).__name__ == "OptimizedModule"
    assert app.prepare(job_params(model_dir, compile="true")) is False
    app.teardown()


def _assert_clear_not_found(err: pytest.ExceptionInfo, model: str) -> None:
    message = str(err.value)
    assert model in message and "make-model" in message and "HF_HOME" in message
    assert "Traceback" not in message and "\n" not in message
    assert err.value.__cause__ is None and err.value.__context__ is None


def test_a_job_cannot_probe_the_workers_filesystem(model_dir: Path, tmp_path: Path):
    """Issue 13: different errors for a missing path and a non-pipeline, stored on the task,
    let a job map the worker's disk. Now every path outside the roots, missing or not a
    pipeline gets the same message (but for the name the job sent)."""
    outside = tmp_path / "outside"
    shutil.copytree(model_dir, outside)  # a real pipeline, but not under a root
    (model_dir / "escape").symlink_to(outside, target_is_directory=True)
    app = runner()
    app.setup(cpu(model_dir))
    probes = ["/etc", "/etc/passwd", "/no/such/path", str(tmp_path), str(outside),
              str(model_dir / "unet"), str(model_dir / "missing"), str(model_dir / ".." / "outside"),
              str(model_dir / "escape"), "~", "./models", "C:/models/x"]
    messages = set()
    for probe in probes:
        with pytest.raises(ModelNotFoundError) as err:
            app.prepare(parse_params({"model": probe}))
        _assert_clear_not_found(err, probe)
        messages.add(str(err.value).replace(repr(probe), "MODEL"))
    assert len(messages) == 1 and "not available on this worker" in messages.pop()
    assert app.pipe is None


def test_model_roots_let_jobs_name_folders_under_them(model_dir: Path,
                                                      monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("NOVA_MODEL_ROOTS", f"/nonexistent{os.pathsep}{model_dir.parent}")
    app = runner()
    app.setup(CPU)  # no -o model: only the roots
    assert app.prepare(job_params(model_dir)) is True
    assert app.model == str(model_dir)
    app.teardown()
    monkeypatch.delenv("NOVA_MODEL_ROOTS")
    app.setup(CPU)  # no roots at all: hub ids only
    with pytest.raises(ModelNotFoundError, match="not available on this worker"):
        app.prepare(job_params(model_dir))


def test_a_hub_id_shaped_name_is_never_read_from_the_workers_disk(
        model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    shutil.copytree(model_dir, tmp_path / "org" / "name")
    monkeypatch.chdir(tmp_path)  # "org/name" exists relative to the worker's folder...
    app = runner()
    app.setup(cpu(model_dir))
    with pytest.raises(ModelNotFoundError, match="HF_HUB_OFFLINE"):  # ...but is a hub id
        app.prepare(parse_params({"model": "org/name"}))


def test_which_names_are_hub_ids():
    assert is_hub_id("stabilityai/sd-turbo") and is_hub_id("a.b/c_d-1")
    for name in ("/abs/path", "./x/y", "a/../b", "a--b/c", "a/b/c", "a", "~/x", "a/b.git",
                 "-a/b", "a/b\n"):
        assert not is_hub_id(name), name
    assert model_roots("", "org/name") == ()  # a hub id adds no folder


def test_uncached_hub_id_offline_is_model_not_found(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    app = runner()
    app.setup(CPU)
    with pytest.raises(ModelNotFoundError) as err:
        app.prepare(parse_params({"model": "nova-queue-tests/not-cached-anywhere"}))
    _assert_clear_not_found(err, "nova-queue-tests/not-cached-anywhere")
    assert "HF_HUB_OFFLINE" in str(err.value)


# -- running ---------------------------------------------------------------------------------

@pytest.mark.parametrize("width,height", [(64, 64), (64, 96)])
def test_one_png_per_prompt_with_provenance(app: Txt2ImgRunner, model_dir: Path, width, height):
    params = job_params(model_dir, width=str(width), height=str(height), seed="11")
    prompts = ["a cat", "東京の夜, café 🚀", "a horse"]
    outputs = app.run_batch(make_inputs(params, prompts))
    assert len(outputs) == 3
    for i, (prompt, out) in enumerate(zip(prompts, outputs)):
        image = Image.open(io.BytesIO(out.data))
        assert image.format == "PNG" and image.size == (width, height)
        assert (out.content_type, out.extension) == ("image/png", "png")
        assert dict(image.text) == dict(out.metadata)
        assert image.text["prompt"] == prompt and image.text["seed"] == str(task_seed(11, i))
        assert (image.text["width"], image.text["height"]) == (str(width), str(height))
        assert image.text["steps"] == "1" and image.text["guidance"] == "0"
        assert image.text["model"] == str(model_dir) and image.text["backend"] == "cpu"
        assert image.text["device"] == "cpu" and image.text["worker"] == "worker-1"
        assert image.text["job"] == "job-a" and image.text["task"] == f"job-a:{i}"
        assert image.text["attempt"] == "1" and image.text["note"] == RANDOM_NOTE


def test_same_seed_same_image_other_seed_other_image(app: Txt2ImgRunner, model_dir: Path):
    first = app.run_batch(make_inputs(job_params(model_dir, seed="3"), ["a cat"]))[0]
    again = app.run_batch(make_inputs(job_params(model_dir, seed="3"), ["a cat"]))[0]
    other = app.run_batch(make_inputs(job_params(model_dir, seed="4"), ["a cat"]))[0]
    assert first.data == again.data
    assert not torch.equal(pixels(first.data), pixels(other.data))


def test_batch_runs_the_pipeline_once_and_matches_single_runs(app, model_dir, pipeline_calls):
    calls, _ = pipeline_calls
    params = job_params(model_dir, seed="9")
    batch = app.run_batch(make_inputs(params, ["a cat", "a dog", "a horse"]))
    assert calls == [3]
    singles = [app.run_batch([task])[0] for task in make_inputs(params, ["a cat", "a dog",
                                                                           "a horse"])]
    assert calls == [3, 1, 1, 1]
    for b, s in zip(batch, singles):
        assert b.metadata == s.metadata
        # Batched CPU kernels may round differently: allow one 8-bit step, nothing more.
        assert (pixels(b.data) - pixels(s.data)).abs().max() <= 1


def test_a_batchs_pngs_are_encoded_on_several_threads_in_task_order(model_dir: Path,
                                                                   monkeypatch):
    app = runner()
    app.setup(cpu(model_dir))
    app.encode_threads = 2
    both = threading.Barrier(2, timeout=20)  # passes only when two encodes run at once
    real = Txt2ImgRunner._encode

    def encode(self, task, image, params):
        if task.index < 2:
            both.wait()
        return real(self, task, image, params)

    monkeypatch.setattr(Txt2ImgRunner, "_encode", encode)
    prompts = ["a cat", "a dog", "a horse"]
    batch = app.run_batch(make_inputs(job_params(model_dir, seed="9"), prompts))
    app.teardown()
    assert [o.metadata["prompt"] for o in batch] == prompts
    assert app._encoders is None  # teardown stopped the threads


def test_oom_splits_the_batch_and_succeeds(app, model_dir, pipeline_calls):
    calls, state = pipeline_calls
    params = job_params(model_dir, seed="21", width="72")
    prompts = ["one", "two", "three", "four"]
    expected = [app.run_batch([t])[0] for t in make_inputs(params, prompts)]
    calls.clear()
    state["fail_above"] = 1
    outputs = app.run_batch(make_inputs(params, prompts))
    assert calls == [4, 2, 1, 1, 2, 1, 1]
    assert [o.metadata["prompt"] for o in outputs] == prompts
    for got, want in zip(outputs, expected):
        assert (pixels(got.data) - pixels(want.data)).abs().max() <= 1
    assert app.batch_size(params) == 1  # learned: this size ran out of memory at 2


def test_oom_at_batch_one_propagates_as_oom(app, model_dir, pipeline_calls):
    _, state = pipeline_calls
    state["fail_above"] = 0
    with pytest.raises(torch.cuda.OutOfMemoryError) as err:
        app.run_batch(make_inputs(job_params(model_dir), ["lonely"]))
    assert app.classify_error(err.value) == "oom"


def test_classify_error():
    app = runner()
    assert app.classify_error(RuntimeError("MPS backend out of memory (MPS allocated: 1 GB)"))\
        == "oom"
    assert app.classify_error(RuntimeError("HIP out of memory. Tried to allocate 2 GiB")) == "oom"
    assert app.classify_error(MemoryError()) == "oom"
    assert app.classify_error(RuntimeError("mat1 and mat2 shapes cannot be multiplied")) == "error"
    assert app.classify_error(ValueError("out of range")) == "error"


def test_benchmark_task(app: Txt2ImgRunner, model_dir: Path):
    app.prepare(job_params(model_dir))
    prompt, params = app.benchmark_task()
    assert prompt == BENCHMARK_PROMPT
    assert params == parse_params({"model": str(model_dir)})
    _, custom = app.benchmark_task(job_params(model_dir, steps="2"))
    assert custom["steps"] == 2 and custom["width"] == 64
    assert runner().benchmark_task()[1]["model"] == "stabilityai/sd-turbo"


def test_weights_load_only_from_safetensors(model_dir: Path, tmp_path: Path):
    """A pickle can run code when loaded: a pipeline whose UNet and VAE are .bin only is
    refused by name (diffusers used to unpickle them); make-model's safetensors load."""
    from diffusers import AutoPipelineForText2Image as Pipeline

    pickled = tmp_path / "pickled"
    Pipeline.from_pretrained(model_dir).save_pretrained(pickled, safe_serialization=False)
    assert not list((pickled / "unet").glob("*.safetensors"))
    app = runner()
    app.setup(cpu(pickled))  # the operator's own folder: trusted, but not its pickles
    with pytest.raises(AppError, match="pickled weights .* safetensors"):
        app.prepare(job_params(pickled))
    app.setup(cpu(model_dir))
    assert app.prepare(job_params(model_dir)) is True and not list(model_dir.glob("*/*.bin"))
    app.teardown()
