"""Which compute backend this worker has, proven by a self-test, and how fast it is.

Backends: ``cuda`` (NVIDIA), ``rocm`` (AMD; torch exposes HIP as ``torch.cuda``), ``mps``
(Apple Metal) and ``cpu``. torch is optional: without it the worker is a CPU worker that runs
torch-free apps (``synthetic``). Detection fails closed: a backend is only reported after a
small seeded kernel ran on it and matched a float64 CPU reference, so a broken driver or a
miscompiled BLAS stops the worker at startup instead of producing garbage results.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import math
import os
import platform
import random
import socket
import subprocess
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from nova_queue import __version__ as nova_version
from nova_queue.errors import BackendError

if TYPE_CHECKING:
    from nova_queue.workers.node import Node

log = logging.getLogger(__name__)

BACKENDS = ("cuda", "rocm", "mps", "cpu")
#: Largest absolute difference allowed between the device kernel and the float64 reference.
#: The kernel's values are O(1); TF32 or fp32 accumulation stays near 1e-3, garbage does not.
SELFTEST_TOLERANCE = 1e-2
_SELFTEST_N = 64
_SELFTEST_SEED = 20240601
_PURE_N = 16  # pure-Python self-test size (no torch)


@dataclasses.dataclass(frozen=True)
class BackendInfo:
    """A detected, self-tested compute backend."""

    backend: str  # "cuda" | "rocm" | "mps" | "cpu"
    device: str  # torch device string ("cuda:0", "mps", "cpu")
    device_name: str
    memory_total: int | None  # bytes: accelerator memory, or host RAM for cpu
    memory_free: int | None
    torch_version: str | None  # None: torch is not installed (pure-Python CPU worker)
    versions: dict[str, str]
    selftest_ok: bool
    selftest_max_err: float


def detect_backend(requested: str = "auto") -> BackendInfo:
    """Detect (``auto``) or check ``requested``, then self-test it; BackendError if unusable."""
    name, index = _parse_request(requested)
    torch, import_error = _import_torch()
    if torch is None:
        if name not in ("auto", "cpu"):
            raise BackendError(
                f"backend {name!r} requested but torch is not installed{import_error}; "
                f"install a torch build with {_LABEL[name]} support: nova-queue setup-torch "
                f"--backend {name} picks it"
            )
        return _pure_python_info()
    available = _available(torch)
    if name == "auto":
        name = next(b for b in BACKENDS if b in available)
        log.info("auto-detected backend %s (available: %s)", name, ", ".join(available))
    elif name not in available:
        raise BackendError(_missing_message(torch, name))
    device = _device_string(torch, name, index)
    max_err = _run_selftest(torch, name, device)
    total, free = _memory(torch, name, device)
    return BackendInfo(
        backend=name, device=device, device_name=_device_name(torch, name, device),
        memory_total=total, memory_free=free, torch_version=str(torch.__version__),
        versions=_versions(torch), selftest_ok=True, selftest_max_err=max_err,
    )


def device_score_gflops(info: BackendInfo, budget_s: float = 0.5) -> float:
    """Matmul GFLOP/s on ``info``'s device (fp16 on GPUs, fp32 on cpu), timed ~``budget_s``."""
    budget_s = max(0.01, float(budget_s))
    if info.torch_version is None:
        return _pure_python_gflops(budget_s)
    import torch

    accel = info.backend != "cpu"
    n = 4096 if info.backend in ("cuda", "rocm") else 2048 if accel else 512
    dtype = torch.float16 if accel else torch.float32
    try:
        a = torch.randn(n, n, device=info.device, dtype=dtype)
        b = torch.randn(n, n, device=info.device, dtype=dtype)
        c = torch.matmul(a, b)  # warm-up (cuBLAS/MPS init), not timed
        _sync(torch, info.backend)
        runs, batch, start = 0, 1, time.perf_counter()
        while True:
            for _ in range(batch):  # batches amortise the sync; sized to land near the budget
                torch.matmul(a, b, out=c)
            _sync(torch, info.backend)
            runs += batch
            elapsed = time.perf_counter() - start
            if elapsed >= budget_s:
                break
            batch = max(1, min(2 * batch, int((budget_s - elapsed) / (elapsed / runs)) + 1))
    except RuntimeError as exc:
        raise BackendError(f"device benchmark failed on {info.device}: {exc}") from exc
    return 2.0 * n**3 * runs / elapsed / 1e9


def capability(
    info: BackendInfo, node: Node, apps: list[str], *, gflops: float | None = None
) -> dict[str, Any]:
    """The JSON-serialisable capability record a worker registers with."""
    record: dict[str, Any] = {
        "backend": info.backend, "device": info.device, "device_name": info.device_name,
        "memory_total": info.memory_total, "memory_free": info.memory_free,
        "host": socket.gethostname(), "host_id": node.host_id, "node_id": node.node_id,
        "node_name": node.name, "pid": os.getpid(), "apps": list(apps),
        "versions": dict(info.versions), "selftest_max_err": info.selftest_max_err,
    }
    if gflops is not None:
        record["gflops"] = round(float(gflops), 3)
    return record


# --- detection -------------------------------------------------------------------------------

_LABEL = {"cuda": "CUDA", "rocm": "ROCm", "mps": "MPS", "cpu": "CPU"}


def _parse_request(requested: str) -> tuple[str, int | None]:
    """``"cuda:1"`` -> ``("cuda", 1)``; ``"auto"`` -> ``("auto", None)``."""
    name, _, idx = (requested or "auto").strip().lower().partition(":")
    if name not in ("auto", *BACKENDS):
        raise BackendError(f"unknown backend {requested!r}; choose auto, {', '.join(BACKENDS)}")
    if not idx:
        return name, None
    if name not in ("cuda", "rocm") or not idx.isdigit():
        raise BackendError(f"invalid backend {requested!r}: only cuda:N and rocm:N take an index")
    return name, int(idx)


def _import_torch() -> tuple[Any, str]:
    """torch, or None and why not (as a suffix for messages)."""
    try:
        return importlib.import_module("torch"), ""
    except ImportError:
        return None, ""
    except Exception as exc:  # noqa: BLE001 — a broken install (bad .so, driver): warn, go on
        log.warning("torch failed to import (%s: %s); treating it as absent",
                    type(exc).__name__, exc)
        return None, f" (import failed: {type(exc).__name__}: {exc})"


def _available(torch: Any) -> list[str]:
    found = []
    if torch.cuda.is_available():
        found.append("rocm" if getattr(torch.version, "hip", None) else "cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        found.append("mps")
    found.append("cpu")
    return found


def _missing_message(torch: Any, name: str) -> str:
    tv, cuda, hip = torch.__version__, torch.version.cuda, getattr(torch.version, "hip", None)
    head = f"backend {name!r} requested but torch reports no {_LABEL[name]} device"
    if name == "cuda" and hip:
        return f"{head} (torch {tv} is a ROCm build, HIP {hip}; use --backend rocm)"
    if name == "rocm" and cuda:
        return f"{head} (torch {tv} is a CUDA build, CUDA {cuda}; use --backend cuda)"
    if name == "cuda":
        if not cuda:
            return (f"{head} (torch {tv}, built without CUDA); nova-queue setup-torch installs "
                    "the build that fits this machine")
        return (f"{head} (torch {tv}, CUDA {cuda}; no device visible: check the NVIDIA "
                f"driver and CUDA_VISIBLE_DEVICES)")
    if name == "rocm":
        if not hip:
            return (f"{head} (torch {tv}, built without ROCm/HIP); nova-queue setup-torch "
                    "installs the build that fits this machine")
        return (f"{head} (torch {tv}, HIP {hip}; no device visible: check the ROCm driver "
                f"and HIP_VISIBLE_DEVICES)")
    mps = getattr(torch.backends, "mps", None)
    built = bool(mps is not None and mps.is_built())
    return f"{head} (torch {tv}, built with MPS: {built}; MPS needs macOS 12.3+ on Apple silicon)"


def _device_string(torch: Any, name: str, index: int | None) -> str:
    if name in ("cuda", "rocm"):
        count = torch.cuda.device_count()
        idx = 0 if index is None else index
        if idx >= count:
            raise BackendError(f"backend '{name}:{idx}' requested but only {count} device(s) "
                               f"are visible (indices 0..{count - 1})")
        return f"cuda:{idx}"
    return name  # "mps" | "cpu"


# --- self-test -------------------------------------------------------------------------------


def _kernel(torch: Any, a: Any, b: Any) -> Any:
    """The self-test kernel: a matmul followed by a nonlinearity."""
    return torch.tanh(a @ b)


def _run_selftest(torch: Any, name: str, device: str) -> float:
    """Run the seeded kernel on ``device``; return max |error| against float64 CPU, or raise."""
    try:
        gen = torch.Generator().manual_seed(_SELFTEST_SEED)
        a = torch.randn(_SELFTEST_N, _SELFTEST_N, generator=gen, dtype=torch.float64) / 8
        b = torch.randn(_SELFTEST_N, _SELFTEST_N, generator=gen, dtype=torch.float64)
        reference = _kernel(torch, a, b)
        # Cast on the CPU: MPS has no float64, so dtype changes must not happen on the device.
        out = _kernel(torch, a.float().to(device), b.float().to(device))
        _sync(torch, name)
        out = out.cpu().double()
        max_err = float((out - reference).abs().max())
    except Exception as exc:  # any failure to run the kernel means the backend is unusable
        raise BackendError(f"backend {name!r} ({device}) failed its self-test: "
                           f"{type(exc).__name__}: {exc}") from exc
    return _check(name, device, max_err)


def _check(name: str, device: str, max_err: float) -> float:
    if not math.isfinite(max_err) or max_err > SELFTEST_TOLERANCE:
        raise BackendError(
            f"backend {name!r} ({device}) failed its self-test: a seeded "
            f"{_SELFTEST_N}x{_SELFTEST_N} matmul+tanh differs from the CPU reference by "
            f"{max_err:.3g} (tolerance {SELFTEST_TOLERANCE:g}); refusing to run on it"
        )
    log.debug("self-test on %s passed (max error %.3g)", device, max_err)
    return max_err


def _pure_matmul_tanh(a: list[list[float]], b: list[list[float]]) -> list[list[float]]:
    cols = list(zip(*b))
    return [[math.tanh(sum(x * y for x, y in zip(row, col))) for col in cols] for row in a]


def _pure_python_info() -> BackendInfo:
    """CPU info without torch; the self-test checks (AB)^T == B^T A^T in pure Python."""
    rng = random.Random(_SELFTEST_SEED)
    a = [[rng.gauss(0, 1) / 8 for _ in range(_PURE_N)] for _ in range(_PURE_N)]
    b = [[rng.gauss(0, 1) for _ in range(_PURE_N)] for _ in range(_PURE_N)]
    out = _pure_matmul_tanh(a, b)
    other = _pure_matmul_tanh([list(c) for c in zip(*b)], [list(r) for r in zip(*a)])
    max_err = max(abs(out[i][j] - other[j][i]) for i in range(_PURE_N) for j in range(_PURE_N))
    _check("cpu", "cpu", max_err)
    total, free = _host_memory()
    return BackendInfo(
        backend="cpu", device="cpu", device_name=_cpu_model(), memory_total=total,
        memory_free=free, torch_version=None, versions=_versions(None), selftest_ok=True,
        selftest_max_err=max_err,
    )


def _pure_python_gflops(budget_s: float) -> float:
    n = 32
    rng = random.Random(1)
    a = [[rng.random() for _ in range(n)] for _ in range(n)]
    cols = list(zip(*a))
    runs, start = 0, time.perf_counter()
    while True:
        [[sum(x * y for x, y in zip(row, col)) for col in cols] for row in a]
        runs += 1
        elapsed = time.perf_counter() - start
        if elapsed >= budget_s:
            return 2.0 * n**3 * runs / elapsed / 1e9


def _sync(torch: Any, name: str) -> None:
    if name in ("cuda", "rocm"):
        torch.cuda.synchronize()
    elif name == "mps":
        torch.mps.synchronize()


# --- description -----------------------------------------------------------------------------


def _device_name(torch: Any, name: str, device: str) -> str:
    if name in ("cuda", "rocm"):
        return str(torch.cuda.get_device_name(device))
    if name == "mps":
        return f"Apple GPU (MPS) on {_cpu_model()}"
    return _cpu_model()


_CPUINFO_KEYS = ("model name", "Model", "Hardware", "cpu model")  # x86, ARM, MIPS


def _cpu_model() -> str:
    """CPU model from /proc/cpuinfo, sysctl (macOS) or platform, else the machine type."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in _CPUINFO_KEYS and value.strip():
                    return value.strip()
    except OSError:
        pass
    if sys.platform == "darwin":
        try:
            out = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"],
                                 check=False, capture_output=True, text=True, timeout=2)
            if out.returncode == 0 and out.stdout.strip():
                return out.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return platform.processor() or platform.machine() or "unknown CPU"


def _memory(torch: Any, name: str, device: str) -> tuple[int | None, int | None]:
    if name in ("cuda", "rocm"):
        free, total = torch.cuda.mem_get_info(torch.device(device))
        return int(total), int(free)
    if name == "mps":
        mps = getattr(torch, "mps", None)
        if mps is not None and hasattr(mps, "recommended_max_memory"):
            total = int(mps.recommended_max_memory())
            used = 0
            if hasattr(mps, "driver_allocated_memory"):
                used = int(mps.driver_allocated_memory())
            return total, max(0, total - used)
    return _host_memory()


def _host_memory() -> tuple[int | None, int | None]:
    """Host RAM (total, available) in bytes, from /proc/meminfo or sysconf."""
    try:
        fields = {}
        with open("/proc/meminfo", encoding="ascii", errors="replace") as f:
            for line in f:
                key, _, rest = line.partition(":")
                parts = rest.split()
                if parts and parts[0].isdigit():
                    fields[key] = int(parts[0]) * 1024  # values are kB
        if "MemTotal" in fields:
            return fields["MemTotal"], fields.get("MemAvailable", fields.get("MemFree"))
    except OSError:
        pass
    try:
        page = os.sysconf("SC_PAGE_SIZE")
        total = page * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None, None
    try:
        free: int | None = page * os.sysconf("SC_AVPHYS_PAGES")
    except (ValueError, OSError):
        free = None  # macOS has no SC_AVPHYS_PAGES
    return total, free


def _versions(torch: Any) -> dict[str, str]:
    """Versions that matter for reproducing a result; packages read from metadata, not imported."""
    out = {"python": platform.python_version(), "nova_queue": nova_version,
           "platform": platform.platform(terse=True)}
    if torch is not None:
        out["torch"] = str(torch.__version__)
        if torch.version.cuda:
            out["cuda"] = str(torch.version.cuda)
        if getattr(torch.version, "hip", None):
            out["hip"] = str(torch.version.hip)
    for pkg in ("diffusers", "transformers", "pillow"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out
