"""txt2img's runner: text to image with SD-Turbo (or any diffusers text-to-image pipeline), one
PNG per prompt. The spec is :mod:`nova_queue.apps.txt2img`; params, task costs and seeds are
in :mod:`nova_queue.apps.txt2img_params`; device and loading helpers in
:mod:`~nova_queue.workers.apps.txt2img_torch`.

Reproducibility: noise comes from a CPU ``torch.Generator`` per task, seeded with
:func:`~nova_queue.apps.txt2img_params.task_seed` and drawn in float32 whatever the model's
dtype, so one seed gives the same starting latents on every backend and precision (images
then differ only by each backend's arithmetic). A batch gets a list of
generators, so batching does not change which noise a task gets (batched kernels may still
round differently: on CPU a few pixels differ by one 8-bit level from a batch-of-1 run).

Worker options (``--option key=value``): ``compile=1`` compiles the UNet for every job (as the
``compile`` param does for one), ``dtype=float32|float16|bfloat16`` overrides the precision.

A batch's PNGs are encoded on up to :data:`ENCODE_THREADS` threads (zlib runs without the
GIL): one after another, a fast GPU waited longer on them than on the pipeline.

Precision: fp16 on cuda and rocm, fp32 on cpu. On mps fp16, unless a small fp16 self-check
(conv, group norm, matmul, softmax against fp32) fails there, then fp32.

Models: a job names a hub id, looked up in the Hugging Face cache first and downloaded only
when missing (never when ``HF_HUB_OFFLINE`` is set), or a pipeline folder under the worker's
model roots (``NOVA_MODEL_ROOTS`` and the worker's ``-o model=DIR``;
:mod:`~nova_queue.workers.apps.txt2img_source`). A model that cannot be found or may not be loaded
raises :class:`~nova_queue.errors.ModelNotFoundError` with one message saying what to do.

Importing this module imports neither torch nor diffusers.
"""

from __future__ import annotations

import io
import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from nova_queue.apps.base import AppContext, AppSpec, TaskInput, TaskOutput
from nova_queue.apps.image_checks import image_problem
from nova_queue.apps.txt2img_params import GIB, default_batch_size, task_seed, truthy
from nova_queue.errors import AppError, InvalidOutput
from nova_queue.settings import Settings
from nova_queue.workers.apps.base import AppRunner
from nova_queue.workers.apps.txt2img_model import RANDOM_NOTE, is_random_model
from nova_queue.workers.apps.txt2img_source import model_roots, resolve_model
from nova_queue.workers.apps.txt2img_torch import (
    dtype_kwarg,
    fp16_self_check,
    free_cache,
    from_pretrained,
    has_safety_checker,
    hub_folder,
    is_oom,
    require_torch,
    synchronize,
)

log = logging.getLogger(__name__)

BENCHMARK_PROMPT = "a photograph of an astronaut riding a horse"
#: at most this many threads encode a batch's PNGs (never more than the CPUs it may use)
ENCODE_THREADS = 8


def _cpus() -> int:
    """CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


class Txt2ImgRunner(AppRunner):
    """SD-Turbo text-to-image through ``diffusers.AutoPipelineForText2Image``."""

    handles_slowdown = True  # _call_pipeline sleeps (slowdown - 1) x each pipeline call
    install_hint = "pip install 'nova-queue[txt2img]'"

    def __init__(self, spec: AppSpec) -> None:
        super().__init__(spec)
        self.ctx: AppContext | None = None
        self.pipe: Any = None
        self.model: str | None = None  # as given in params, for provenance
        self.dtype_name = "float32"
        self.last_load_s: float | None = None
        self.last_run_s: float | None = None
        self._compiled = False
        self._slicing: bool | None = None
        self._random_weights = False
        self._oom_cap: dict[tuple[str, int, int], int] = {}
        self._roots: tuple[Path, ...] = ()
        #: threads that make a batch's PNGs (zlib runs without the GIL): on a fast GPU,
        #: encoding a batch one image after another took longer than the pipeline
        self.encode_threads = min(ENCODE_THREADS, _cpus())
        self._encoders: ThreadPoolExecutor | None = None

    def setup(self, ctx: AppContext) -> None:
        """Check torch and diffusers are here; remember the backend and the model roots;
        choose the precision (see the module docstring)."""
        require_torch()
        self.ctx = ctx
        self._roots = model_roots(Settings.from_env().model_roots, ctx.options.get("model"))
        if ctx.backend == "mps":
            # Read by torch when it is first imported: the worker should set it before that too.
            os.environ.setdefault("PYTORCH_ENABLE_MPS_FALLBACK", "1")
        forced = ctx.options.get("dtype")
        if forced:
            if forced not in ("float32", "float16", "bfloat16"):
                raise AppError(f"option dtype: must be float32/float16/bfloat16, got {forced!r}")
            self.dtype_name = forced
        elif ctx.backend in ("cuda", "rocm"):
            self.dtype_name = "float16"
        elif ctx.backend == "mps":
            self.dtype_name = "float16" if fp16_self_check(ctx.device) else "float32"
            if self.dtype_name == "float32":
                log.warning("fp16 self-check failed on %s; running txt2img in fp32", ctx.device)
        else:
            self.dtype_name = "float32"

    def _context(self) -> AppContext:
        if self.ctx is None:
            raise AppError("txt2img: setup(ctx) must be called before use")
        return self.ctx

    def prepare(self, params: Mapping[str, Any]) -> bool:
        """Load ``params['model']`` unless it is loaded; compile if asked. True if anything
        was (re)loaded or compiled."""
        ctx = self._context()
        changed = False
        if self.pipe is None or self.model != params["model"]:
            self._load(params["model"])
            changed = True
        if (params.get("compile") or truthy(ctx.options.get("compile", ""))) \
                and not self._compiled:
            self._compile()
            changed = True
        self._set_slicing(params.get("attention_slicing", "auto"))
        return changed

    def _load(self, model: str) -> None:
        import torch
        from diffusers import AutoPipelineForText2Image

        ctx = self._context()
        self._unload()
        log.info("txt2img: loading %s (%s on %s)", model, self.dtype_name, ctx.device)
        found = resolve_model(model, self._roots)  # hub id, or a pipeline under the roots
        folder = found.source if found.local else hub_folder(model)
        kwargs: dict[str, Any] = {dtype_kwarg(): getattr(torch, self.dtype_name)}
        index = json.loads((Path(folder) / "model_index.json").read_text(encoding="utf-8"))
        if has_safety_checker(index):
            kwargs.update(safety_checker=None, requires_safety_checker=False)
        started = time.perf_counter()
        self.pipe = from_pretrained(AutoPipelineForText2Image, model, folder, kwargs)
        self.pipe.to(ctx.device)
        self.pipe.set_progress_bar_config(disable=True)
        self._synchronize()
        self.last_load_s = time.perf_counter() - started
        self.model, self._random_weights = model, found.local and is_random_model(folder)
        self._compiled, self._slicing = False, None
        log.info("txt2img loaded %s (%s on %s) in %.2fs", model, self.dtype_name, ctx.device,
                 self.last_load_s)

    def _compile(self) -> None:
        import torch

        self.pipe.unet = torch.compile(self.pipe.unet)
        self._compiled = True
        log.info("txt2img: UNet wrapped with torch.compile (compiles on the first batch)")

    def _set_slicing(self, mode: bool | str) -> None:
        ctx = self._context()
        small_gpu = (ctx.backend in ("cuda", "rocm") and ctx.memory_total is not None
                     and ctx.memory_total < 8 * GIB)
        wanted = bool(mode) if mode != "auto" else (ctx.backend == "mps" or small_gpu)
        if wanted != self._slicing:
            if wanted:
                self.pipe.enable_attention_slicing()
            else:
                self.pipe.disable_attention_slicing()
            self._slicing = wanted

    def batch_size(self, params: Mapping[str, Any]) -> int:
        """Images per call: ``batch`` if given, else :func:`default_batch_size`, lowered to
        half the size that last ran out of memory for this model and image size."""
        if params.get("batch"):
            return int(params["batch"])
        ctx = self._context()
        size = default_batch_size(ctx.backend, params["width"], params["height"],
                                  memory_free=ctx.memory_free, memory_total=ctx.memory_total,
                                  dtype=self.dtype_name)
        learned = self._oom_cap.get((params["model"], params["width"], params["height"]))
        return min(size, learned) if learned else size

    def run_batch(self, tasks: Sequence[TaskInput]) -> list[TaskOutput | BaseException]:
        """One pipeline call for all ``tasks`` (one job's params); halves the batch on OOM."""
        if not tasks:
            return []
        params = tasks[0].params
        if self.pipe is None or self.model != params["model"]:
            self.prepare(params)
        images = self._generate(list(tasks), params, top=True)
        # a task that still ran out of memory alone comes back as its exception (the
        # worker reports it as "oom"), one whose image holds NaN as InvalidOutput (the
        # worker's fault); the rest of the batch is committed
        params_of = [params] * len(tasks)
        if len(tasks) == 1 or self.encode_threads < 2:
            return list(map(self._finish, tasks, images, params_of))
        if self._encoders is None:
            self._encoders = ThreadPoolExecutor(self.encode_threads,
                                                thread_name_prefix="txt2img-png")
        return list(self._encoders.map(self._finish, tasks, images, params_of))

    def _finish(self, task: TaskInput, image: Any, params: Mapping[str, Any]
                ) -> TaskOutput | BaseException:
        picture = self._picture(image)
        return picture if isinstance(picture, BaseException) else self._encode(task, picture,
                                                                                params)

    def _picture(self, image: Any) -> Any:
        """The PIL image of one float image (H, W, 3 in 0..1) of the pipeline, or the
        InvalidOutput for one holding NaN or infinity (the fp16 VAE overflow; a PNG would
        show it black). Quantised as diffusers' ``output_type="pil"`` does."""
        import numpy as np

        if isinstance(image, BaseException):
            return image
        if not np.isfinite(image).all():
            return InvalidOutput(f"NaN or infinite pixel values ({self.dtype_name} on "
                                 f"{self._context().backend}: try -o dtype=float32)")
        return self.pipe.numpy_to_pil(image[None])[0]

    def _generate(self, tasks: list[TaskInput], params: Mapping[str, Any], top: bool = False
                  ) -> list[Any]:
        try:
            return self._call_pipeline(tasks, params)
        except Exception as exc:
            if not is_oom(exc):
                raise
            if len(tasks) == 1:
                self._free_cache()
                if top:
                    raise
                return [exc]
            log.warning("txt2img: out of memory at batch %d (%dx%d); retrying in halves",
                        len(tasks), params["width"], params["height"])
        # Out of the except block: the exception's frames (and their tensors) are gone now.
        self._free_cache()
        key = (params["model"], params["width"], params["height"])
        self._oom_cap[key] = max(1, min(self._oom_cap.get(key, 64), len(tasks) // 2))
        half = (len(tasks) + 1) // 2
        return self._generate(tasks[:half], params) + self._generate(tasks[half:], params)

    def _call_pipeline(self, tasks: list[TaskInput], params: Mapping[str, Any]) -> list[Any]:
        import torch

        generators = [torch.Generator("cpu").manual_seed(task_seed(params["seed"], t.index))
                      for t in tasks]
        started = time.perf_counter()
        result = self.pipe(
            prompt=[t.input for t in tasks], num_inference_steps=params["steps"],
            guidance_scale=params["guidance"], width=params["width"], height=params["height"],
            generator=generators, output_type="np",  # floats: NaN is still visible
            **self._starting_latents(generators, params),
        )
        self._synchronize()
        self.last_run_s = time.perf_counter() - started
        slowdown = self._context().slowdown
        if slowdown > 1.0:  # simulate slower hardware (--slowdown) for fleet demos
            time.sleep(self.last_run_s * (slowdown - 1.0))
        return list(result.images)

    def _starting_latents(self, generators: list[Any], params: Mapping[str, Any]
                          ) -> dict[str, Any]:
        """``{"latents": ...}``: each task's starting noise drawn in float32 from its
        generator (as diffusers draws it), then cast to the pipeline's dtype; ``{}`` for a
        pipeline without a UNet (diffusers then draws it).

        diffusers draws the noise in the pipeline's dtype, and torch's CPU sampler gave
        float16 and bfloat16 other numbers than float32 for one seed (torch 2.11: a GPU
        worker's fp16 image of a task shared nothing with a CPU worker's, 28-34 bits of 64
        apart), so honest workers failed each other's verification. Noise drawn in float32
        does not depend on the model's dtype."""
        import torch

        unet, scale = getattr(self.pipe, "unet", None), getattr(self.pipe, "vae_scale_factor", None)
        channels = getattr(getattr(unet, "config", None), "in_channels", None)
        if not isinstance(channels, int) or not isinstance(scale, int):
            return {}
        shape = (1, channels, params["height"] // scale, params["width"] // scale)
        noise = [torch.randn(shape, generator=g, dtype=torch.float32) for g in generators]
        return {"latents": torch.cat(noise).to(dtype=unet.dtype)}

    def _encode(self, task: TaskInput, image: Any, params: Mapping[str, Any]) -> TaskOutput:
        from PIL.PngImagePlugin import PngInfo

        ctx = self._context()
        meta = {
            "prompt": task.input, "seed": str(task_seed(params["seed"], task.index)),
            "job_seed": str(params["seed"]), "steps": str(params["steps"]),
            "width": str(params["width"]), "height": str(params["height"]),
            "guidance": f"{params['guidance']:g}", "model": str(params["model"]),
            "dtype": self.dtype_name, "backend": ctx.backend, "device": ctx.device,
            "device_name": ctx.device_name, "worker": ctx.worker_name,
            "worker_id": ctx.worker_id, "job": task.job_id, "task": task.task_id,
            "index": str(task.index), "attempt": str(task.attempt), "software": "nova-queue",
        }
        if self._random_weights:
            meta["note"] = RANDOM_NOTE
        info = PngInfo()
        for key, value in meta.items():
            info.add_text(key, value)  # falls back to an iTXt chunk for non-Latin-1 text
        buf = io.BytesIO()
        image.save(buf, format="PNG", pnginfo=info)
        return TaskOutput(buf.getvalue(), "image/png", "png", meta)

    def benchmark_task(self, params: Mapping[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """The astronaut prompt with ``params`` (raw or parsed), else defaults for the loaded
        model."""
        if params is None:
            # the loaded model, else the worker's `-o model=...`, else the default model
            model = self.model or (self.ctx.options.get("model") if self.ctx else None)
            params = {"model": model} if model else {}
        return BENCHMARK_PROMPT, self.spec.parse_params(params)

    def classify_error(self, exc: BaseException) -> str:
        """``"oom"`` for CUDA/ROCm/MPS/host out-of-memory errors, else ``"error"``."""
        return "oom" if is_oom(exc) else "error"

    def validate(self, output: TaskOutput) -> None:
        """InvalidOutput for a PNG that is not the size asked for, all black or one colour
        (:func:`~nova_queue.apps.image_checks.image_problem`); NaN is caught before the
        PNG is made (``_picture``)."""
        meta = output.metadata
        problem = image_problem(output.data, _int(meta.get("width")), _int(meta.get("height")))
        if problem:
            raise InvalidOutput(problem)

    def teardown(self) -> None:
        """Drop the pipeline, free device caches and stop the PNG threads."""
        self._unload()
        if self._encoders is not None:
            self._encoders.shutdown(wait=True)
            self._encoders = None

    def _unload(self) -> None:
        if self.pipe is not None:
            self.pipe = None
            self.model = None
            self._free_cache()

    def _synchronize(self) -> None:
        synchronize(self.ctx.backend if self.ctx else "cpu")

    def _free_cache(self) -> None:
        free_cache()


def _int(text: str | None) -> int | None:
    """``text`` as an int, None when it is not one."""
    try:
        return int(text) if text else None
    except ValueError:
        return None
