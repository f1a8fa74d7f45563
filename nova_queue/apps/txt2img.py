"""txt2img: text to image with SD-Turbo (or any diffusers text-to-image pipeline), one PNG per
prompt. Params, task costs and seeds are in :mod:`nova_queue.apps.txt2img_params`.

Reproducibility: noise comes from a CPU ``torch.Generator`` per task, seeded with
:func:`~nova_queue.apps.txt2img_params.task_seed`, so one seed gives the same starting latents
on every backend (images then differ only by each backend's arithmetic). A batch gets a list of
generators, so batching does not change which noise a task gets (batched kernels may still
round differently: on CPU a few pixels differ by one 8-bit level from a batch-of-1 run).

Worker options (``--option key=value``): ``compile=1`` compiles the UNet for every job (as the
``compile`` param does for one), ``dtype=float32|float16|bfloat16`` overrides the precision.

Precision: fp16 on cuda and rocm, fp32 on cpu. On mps fp16, unless a small fp16 self-check
(conv, group norm, matmul, softmax against fp32) fails there, then fp32.

Models: a job names a hub id, looked up in the Hugging Face cache first and downloaded only
when missing (never when ``HF_HUB_OFFLINE`` is set), or a pipeline folder under the worker's
model roots (``NOVA_MODEL_ROOTS`` and the worker's ``-o model=DIR``;
:mod:`~nova_queue.apps.txt2img_source`). A model that cannot be found or may not be loaded
raises :class:`~nova_queue.errors.ModelNotFoundError` with one message saying what to do.

Importing this module imports neither torch nor diffusers.
"""

from __future__ import annotations

import gc
import io
import json
import logging
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from nova_queue.apps.base import App, AppContext, TaskInput, TaskOutput
from nova_queue.apps.txt2img_model import RANDOM_NOTE, is_random_model, quiet_progress_bars
from nova_queue.apps.txt2img_params import (
    GIB,
    default_batch_size,
    parse_params,
    task_cost,
    task_seed,
    truthy,
)
from nova_queue.apps.txt2img_source import model_roots, resolve_model
from nova_queue.errors import AppError, ModelNotFoundError
from nova_queue.models import TaskSpec
from nova_queue.settings import Settings

log = logging.getLogger(__name__)

BENCHMARK_PROMPT = "a photograph of an astronaut riding a horse"


def is_oom(exc: BaseException) -> bool:
    """True when ``exc`` means the device (CUDA, ROCm, MPS) or host ran out of memory."""
    if isinstance(exc, MemoryError):
        return True
    torch = sys.modules.get("torch")
    oom_cls = getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None)
    if oom_cls is not None and isinstance(exc, oom_cls):  # ROCm raises the same class
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()  # MPS, HIP


def _hub_offline() -> bool:
    return truthy(os.environ.get("HF_HUB_OFFLINE", ""))


def _not_found(model: str, reason: str) -> ModelNotFoundError:
    return ModelNotFoundError(
        f"txt2img model {model!r} not found: {reason}. To fix: run `nova-queue make-model DIR` "
        "for a local random-weight test model and submit with -p model=DIR; or let this worker "
        "download the model once with network access (HF_HUB_OFFLINE unset); or set HF_HOME to "
        "a Hugging Face cache that already holds it."
    )


def fp16_self_check(device: str) -> bool:
    """True when fp16 matmul, conv, group norm and softmax on ``device`` agree with fp32."""
    import torch
    import torch.nn.functional as F

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(1, 32, 16, 16, generator=gen)
    w = torch.randn(32, 32, 3, 3, generator=gen) / 17

    def run(t: Any, k: Any) -> Any:
        y = F.group_norm(F.conv2d(t, k, padding=1), 8)
        flat = y.flatten(2)
        return torch.softmax(flat @ flat.transpose(1, 2) / 16, dim=-1) @ flat

    try:
        ref = run(x, w)
        half = run(x.to(device, torch.float16), w.to(device, torch.float16)).float().cpu()
    except (RuntimeError, TypeError, NotImplementedError) as exc:
        log.info("fp16 self-check on %s raised %s", device, exc)
        return False
    err = (half - ref).abs().max().item() / max(ref.abs().max().item(), 1e-6)
    return bool(torch.isfinite(half).all().item()) and err < 2e-2


class Txt2ImgApp(App):
    """SD-Turbo text-to-image through ``diffusers.AutoPipelineForText2Image``."""

    name = "txt2img"
    description = "Text to image with SD-Turbo (diffusers): one PNG per prompt."
    handles_slowdown = True  # _call_pipeline sleeps (slowdown - 1) x each pipeline call

    def __init__(self) -> None:
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

    # -- job side (client and worker) -------------------------------------------------------

    def parse_params(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """Validate params (strings, or already-parsed values) into a JSON-able dict."""
        return parse_params(raw)

    def make_tasks(self, prompts: Sequence[str], params: Mapping[str, Any]) -> list[TaskSpec]:
        """One task per prompt, costed ``width * height * steps / 512**2``."""
        cost = task_cost(params)
        return [TaskSpec(prompt, cost) for prompt in prompts]

    # -- worker side --------------------------------------------------------------------------

    def setup(self, ctx: AppContext) -> None:
        """Remember the backend and the model roots; choose the precision (see the module
        docstring)."""
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
        found = resolve_model(model, self._roots)  # hub id, or a pipeline under the roots
        folder = found.source if found.local else self._hub_folder(model)
        kwargs: dict[str, Any] = {_dtype_kwarg(): getattr(torch, self.dtype_name)}
        index = json.loads((Path(folder) / "model_index.json").read_text(encoding="utf-8"))
        if _has_safety_checker(index):
            kwargs.update(safety_checker=None, requires_safety_checker=False)
        started = time.perf_counter()
        self.pipe = self._from_pretrained(AutoPipelineForText2Image, model, folder, kwargs)
        self.pipe.to(ctx.device)
        self.pipe.set_progress_bar_config(disable=True)
        self._synchronize()
        self.last_load_s = time.perf_counter() - started
        self.model, self._random_weights = model, found.local and is_random_model(folder)
        self._compiled, self._slicing = False, None
        log.info("txt2img loaded %s (%s on %s) in %.2fs", model, self.dtype_name, ctx.device,
                 self.last_load_s)

    @staticmethod
    def _hub_folder(model: str) -> str:
        """The cached snapshot of hub id ``model``: the local cache first, then the network
        (never with HF_HUB_OFFLINE). An absolute folder, so the id is never read as a path
        relative to the worker's working directory."""
        from diffusers import DiffusionPipeline

        for local_only in (True, False):
            if not local_only and _hub_offline():
                raise _not_found(model, "it is not in the local Hugging Face cache and "
                                        "HF_HUB_OFFLINE is set")
            try:
                with quiet_progress_bars():
                    return str(DiffusionPipeline.download(model, local_files_only=local_only))
            except Exception as exc:  # noqa: BLE001 - any failure here means "not available"
                log.debug("fetching %s (local_only=%s): %r", model, local_only, exc)
        raise _not_found(model, "it is not in the local Hugging Face cache and could not be "
                                "downloaded from the Hugging Face Hub")

    @staticmethod
    def _from_pretrained(loader: Any, model: str, folder: str, kwargs: dict[str, Any]) -> Any:
        try:
            with quiet_progress_bars():
                return loader.from_pretrained(folder, local_files_only=True, **kwargs)
        except OSError as exc:  # missing files: diffusers' errors are OSErrors
            log.debug("loading %s from %s: %r", model, folder, exc)
        except Exception as exc:
            raise AppError(f"txt2img model {model!r} could not be loaded: "
                           f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}") from exc
        raise _not_found(model, "some of its files are missing")

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
        # worker reports it as "oom"); the rest of the batch is committed
        return [image if isinstance(image, BaseException) else self._encode(task, image, params)
                for task, image in zip(tasks, images)]

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
            generator=generators, output_type="pil",
        )
        self._synchronize()
        self.last_run_s = time.perf_counter() - started
        slowdown = self._context().slowdown
        if slowdown > 1.0:  # simulate slower hardware (--slowdown) for fleet demos
            time.sleep(self.last_run_s * (slowdown - 1.0))
        return list(result.images)

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
        return BENCHMARK_PROMPT, self.parse_params(params)

    def classify_error(self, exc: BaseException) -> str:
        """``"oom"`` for CUDA/ROCm/MPS/host out-of-memory errors, else ``"error"``."""
        return "oom" if is_oom(exc) else "error"

    def teardown(self) -> None:
        """Drop the pipeline and free device caches."""
        self._unload()

    def _unload(self) -> None:
        if self.pipe is not None:
            self.pipe = None
            self.model = None
            self._free_cache()

    def _synchronize(self) -> None:
        _synchronize(self.ctx.backend if self.ctx else "cpu")

    def _free_cache(self) -> None:
        _free_cache()


def _synchronize(backend: str) -> None:
    """Wait for queued device work, so timers read after it are true."""
    torch = sys.modules.get("torch")
    if torch is not None and backend in ("cuda", "rocm") and torch.cuda.is_available():
        torch.cuda.synchronize()
    elif torch is not None and backend == "mps" and torch.backends.mps.is_available():
        torch.mps.synchronize()


def _free_cache() -> None:
    """Collect garbage and return cached device memory to the driver."""
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()
    if torch is not None and torch.backends.mps.is_available():
        torch.mps.empty_cache()


def _dtype_kwarg() -> str:
    """``dtype`` where diffusers accepts it (it deprecated ``torch_dtype``), else the old name."""
    try:
        import diffusers.utils.deprecation_utils as dep
    except ImportError:
        return "torch_dtype"
    return "dtype" if hasattr(dep, "_resolve_dtype") else "torch_dtype"


def _has_safety_checker(model_index: Mapping[str, Any]) -> bool:
    """Whether the pipeline class takes a safety checker (to pass None rather than load one)."""
    import inspect

    import diffusers

    cls = getattr(diffusers, str(model_index.get("_class_name", "")), None)
    try:
        return cls is not None and "safety_checker" in inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        return False
