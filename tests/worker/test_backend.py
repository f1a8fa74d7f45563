"""Backend detection: real torch here, a torch-less interpreter, and fail-closed self-tests."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from nova_queue.errors import BackendError
from nova_queue.workers import backend
from nova_queue.workers.backend import (
    BackendInfo,
    capability,
    detect_backend,
    device_score_gflops,
)
from nova_queue.workers.node import load_or_create_node

torch = pytest.importorskip("torch")


def _available() -> set[str]:
    found = {"cpu"}
    if torch.cuda.is_available():
        found.add("rocm" if torch.version.hip else "cuda")
    if torch.backends.mps.is_available():
        found.add("mps")
    return found


def test_cpu_backend_passes_its_self_test():
    info = detect_backend("cpu")
    assert (info.backend, info.device) == ("cpu", "cpu")
    assert info.selftest_ok and 0 <= info.selftest_max_err < 1e-4
    assert info.torch_version == torch.__version__ == info.versions["torch"]
    assert info.versions["python"].count(".") == 2
    assert info.memory_total and info.memory_total > 2**26
    assert info.memory_free is not None and 0 < info.memory_free <= info.memory_total
    assert info.device_name and info.device_name != "unknown CPU"


def test_auto_picks_the_best_available():
    info = detect_backend()
    expected = next(b for b in ("cuda", "rocm", "mps", "cpu") if b in _available())
    assert info.backend == expected and info.selftest_ok
    if expected in ("cuda", "rocm"):
        assert info.device == "cuda:0" and info.memory_total and info.memory_total > 2**30


@pytest.mark.parametrize("name", ["cuda", "rocm", "mps"])
def test_missing_backend_is_refused_with_a_clear_message(name):
    if name in _available():
        pytest.skip(f"{name} is available here")
    with pytest.raises(BackendError) as info:
        detect_backend(name)
    msg = str(info.value)
    assert f"backend {name!r} requested" in msg and torch.__version__ in msg


def test_cuda_message_names_a_cpu_only_build():
    if torch.version.cuda or torch.version.hip:
        pytest.skip("torch here is a GPU build")
    with pytest.raises(BackendError, match=r"no CUDA device \(torch .*, built without CUDA\); "
                                           r"nova-queue setup-torch"):
        detect_backend("cuda")


@pytest.mark.parametrize("bad", ["tpu", "cpu:0", "cuda:x", "gpu"])
def test_unknown_backend_names(bad):
    with pytest.raises(BackendError, match="backend"):
        detect_backend(bad)


def test_device_index_out_of_range():
    if not {"cuda", "rocm"} & _available():
        pytest.skip("needs a CUDA/ROCm device")
    name = "rocm" if torch.version.hip else "cuda"
    with pytest.raises(BackendError, match="only .* device"):
        detect_backend(f"{name}:{torch.cuda.device_count()}")


def test_self_test_mismatch_fails_closed(monkeypatch):
    real = backend._kernel

    def corrupted(t, a, b):  # the device (fp32) run is wrong; the fp64 reference is right
        out = real(t, a, b)
        return out + 0.5 if a.dtype == t.float32 else out

    monkeypatch.setattr(backend, "_kernel", corrupted)
    with pytest.raises(BackendError, match="failed its self-test.*differs"):
        detect_backend("cpu")


def test_self_test_nan_fails_closed(monkeypatch):
    real = backend._kernel
    monkeypatch.setattr(backend, "_kernel", lambda t, a, b: real(t, a, b) * float("nan"))
    with pytest.raises(BackendError, match="self-test"):
        detect_backend("cpu")


def test_self_test_crash_fails_closed(monkeypatch):
    def broken(t, a, b):
        raise RuntimeError("CUBLAS_STATUS_EXECUTION_FAILED")

    monkeypatch.setattr(backend, "_kernel", broken)
    with pytest.raises(BackendError, match="CUBLAS_STATUS_EXECUTION_FAILED"):
        detect_backend("cpu")


def test_gflops_is_positive_and_bounded_in_time():
    info = detect_backend("cpu")
    start = time.perf_counter()
    score = device_score_gflops(info, budget_s=0.2)
    elapsed = time.perf_counter() - start
    assert score > 0.1 and elapsed < 5.0


def test_capability_record(tmp_path):
    info = detect_backend("cpu")
    node = load_or_create_node(tmp_path)
    record = capability(info, node, ["synthetic"], gflops=12.3456)
    assert json.loads(json.dumps(record)) == record
    assert record["node_id"] == node.node_id and record["host_id"] == node.host_id
    assert record["apps"] == ["synthetic"] and record["gflops"] == 12.346
    for key in ("backend", "device", "device_name", "memory_total", "memory_free", "host",
                "pid", "versions"):
        assert key in record
    assert "gflops" not in capability(info, node, [])


_NO_TORCH = """
import json, sys
sys.modules["torch"] = None  # `import torch` now raises ImportError, as if not installed
from nova_queue.errors import BackendError
from nova_queue.workers.backend import detect_backend, device_score_gflops
info = detect_backend()
out = {"backend": info.backend, "device": info.device, "torch": info.torch_version,
       "ok": info.selftest_ok, "versions": info.versions, "mem": info.memory_total,
       "gflops": device_score_gflops(info, budget_s=0.1)}
try:
    detect_backend("cuda")
except BackendError as exc:
    out["cuda_error"] = str(exc)
print(json.dumps(out))
"""


def test_without_torch_the_worker_is_a_cpu_worker():
    proc = subprocess.run([sys.executable, "-c", _NO_TORCH], check=False, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["backend"], out["device"], out["torch"], out["ok"]) == ("cpu", "cpu", None, True)
    assert "torch" not in out["versions"] and out["mem"] > 0
    assert 0 < out["gflops"] < 5  # pure Python: clearly slower than any BLAS
    assert "backend 'cuda' requested but torch is not installed" in out["cuda_error"]


def test_backend_info_is_frozen():
    info = detect_backend("cpu")
    assert isinstance(info, BackendInfo)
    with pytest.raises(AttributeError):
        info.backend = "cuda"  # type: ignore[misc]
