"""txt2img's device and loading helpers: out-of-memory detection, the fp16 self-check,
device synchronisation and cache release, and finding and loading a diffusers pipeline.
torch and diffusers are imported inside the functions that need them."""

from __future__ import annotations

import gc
import inspect
import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nova_queue.apps.txt2img_params import truthy
from nova_queue.errors import AppError, ModelNotFoundError
from nova_queue.workers.apps.txt2img_model import quiet_progress_bars

log = logging.getLogger(__name__)


def require_torch() -> None:
    """AppError naming ``nova-queue setup-torch`` unless torch and diffusers import (a
    worker for txt2img without them would join, then fail every task)."""
    for module in ("torch", "diffusers"):
        try:
            __import__(module)
        except ImportError as exc:
            raise AppError(
                f"txt2img needs {module}, which does not import here ({exc}): run `nova-queue "
                "setup-torch` (the torch build for this machine), then `pip install "
                "'nova-queue[txt2img]'`") from None


def is_oom(exc: BaseException) -> bool:
    """True when ``exc`` means the device (CUDA, ROCm, MPS) or host ran out of memory."""
    if isinstance(exc, MemoryError):
        return True
    torch = sys.modules.get("torch")
    oom_cls = getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None)
    if oom_cls is not None and isinstance(exc, oom_cls):  # ROCm raises the same class
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()  # MPS, HIP


def hub_offline() -> bool:
    """Whether ``HF_HUB_OFFLINE`` forbids downloads."""
    return truthy(os.environ.get("HF_HUB_OFFLINE", ""))


def not_found(model: str, reason: str) -> ModelNotFoundError:
    """The error for a hub model this worker cannot get, saying what to do."""
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


def hub_folder(model: str) -> str:
    """The cached snapshot of hub id ``model``: the local cache first, then the network
    (never with HF_HUB_OFFLINE). An absolute folder, so the id is never read as a path
    relative to the worker's working directory."""
    from diffusers import DiffusionPipeline

    for local_only in (True, False):
        if not local_only and hub_offline():
            raise not_found(model, "it is not in the local Hugging Face cache and "
                                   "HF_HUB_OFFLINE is set")
        try:
            with quiet_progress_bars():
                return str(DiffusionPipeline.download(model, local_files_only=local_only,
                                                      use_safetensors=True))
        except Exception as exc:  # noqa: BLE001 - any failure here means "not available"
            log.debug("fetching %s (local_only=%s): %r", model, local_only, exc)
            if "necessary `safetensors` weights" in str(exc):  # the repo has pickles only
                raise pickled_only(model) from None
    raise not_found(model, "it is not in the local Hugging Face cache and could not be "
                           "downloaded from the Hugging Face Hub")


#: Weight files that are pickles (loading one can run code): never loaded, only named.
PICKLED_WEIGHTS = ("*.bin", "*.pt", "*.pth", "*.ckpt", "*.pkl")


def pickled_only(model: str) -> AppError:
    """The error for a model whose weights are pickles, not safetensors."""
    return AppError(f"txt2img model {model!r} has pickled weights (.bin, .pt, ...) where "
                    "safetensors are needed: a worker loads only .safetensors weights, since "
                    "loading a pickle can run code. Convert it (save_pretrained with "
                    "safe_serialization=True) or use a model that ships safetensors.")


def from_pretrained(loader: Any, model: str, folder: str, kwargs: dict[str, Any]) -> Any:
    """``loader.from_pretrained(folder)`` offline, safetensors weights only
    (``use_safetensors=True``: a pickled ``.bin`` is never unpickled); missing files are a
    not-found error, pickled weights where safetensors are missing :func:`pickled_only`, any
    other failure an AppError naming the model."""
    try:
        with quiet_progress_bars():
            return loader.from_pretrained(folder, local_files_only=True, use_safetensors=True,
                                          **kwargs)
    except OSError as exc:  # missing files: diffusers' errors are OSErrors
        log.debug("loading %s from %s: %r", model, folder, exc)
    except Exception as exc:
        raise AppError(f"txt2img model {model!r} could not be loaded: "
                       f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}") from exc
    root = Path(folder)  # a pipeline: weights in the folder or its component folders
    if any(next(root.glob(where + pattern), None) for pattern in PICKLED_WEIGHTS
           for where in ("", "*/")):
        raise pickled_only(model)
    raise not_found(model, "some of its files are missing")


def synchronize(backend: str) -> None:
    """Wait for queued device work, so timers read after it are true."""
    torch = sys.modules.get("torch")
    if torch is not None and backend in ("cuda", "rocm") and torch.cuda.is_available():
        torch.cuda.synchronize()
    elif torch is not None and backend == "mps" and torch.backends.mps.is_available():
        torch.mps.synchronize()


def free_cache() -> None:
    """Collect garbage and return cached device memory to the driver."""
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()
    if torch is not None and torch.backends.mps.is_available():
        torch.mps.empty_cache()


def dtype_kwarg() -> str:
    """``dtype`` where diffusers accepts it (it deprecated ``torch_dtype``), else the old name."""
    try:
        import diffusers.utils.deprecation_utils as dep
    except ImportError:
        return "torch_dtype"
    return "dtype" if hasattr(dep, "_resolve_dtype") else "torch_dtype"


def has_safety_checker(model_index: Mapping[str, Any]) -> bool:
    """Whether the pipeline class takes a safety checker (to pass None rather than load one)."""
    import diffusers

    cls = getattr(diffusers, str(model_index.get("_class_name", "")), None)
    try:
        return cls is not None and "safety_checker" in inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        return False
