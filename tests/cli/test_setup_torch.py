"""``nova-queue setup-torch``: the torch build that fits the machine. Detection is faked at
its boundary only: ``nvidia-smi`` and ``rocminfo`` on PATH (small scripts that answer as the
real tools do), ``ROCM_PATH``, and the OS for Apple silicon; the command itself runs for
real (``--dry-run`` prints what it would install)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from novatests.cli import nova_command, nova_env, process_env

from nova_queue import torch_setup
from nova_queue.torch_setup import DEFAULT_TORCH, PYTORCH_INDEX, Machine

ROOT = Path(__file__).resolve().parents[2]
#: What rocminfo prints for a GPU agent (an excerpt), and for a machine with only a CPU agent.
ROCMINFO_GPU = "Agent 2\n  Name:                    gfx1100\n  Marketing Name:  Radeon RX 7900 XTX\n"
ROCMINFO_CPU = "Agent 1\n  Name:                    AMD Ryzen 9 7950X\n"


def tool(folder: Path, name: str, out: str, code: int = 0) -> None:
    """A fake ``name`` on PATH that prints ``out`` and exits ``code``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    lines = "".join(f"echo '{line}'\n" for line in out.splitlines())  # builtins: no PATH
    path.write_text(f"#!/bin/sh\n{lines}exit {code}\n")
    path.chmod(0o755)


def setup_torch(tmp_path: Path, *args: str, tools: Path | None = None,
                extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``nova-queue setup-torch --dry-run ARGS`` with only ``tools`` on PATH (no GPU tool of
    this machine leaks in)."""
    env = process_env(nova_env("redis://127.0.0.1:1/0", "n", tmp_path, **(extra_env or {})))
    env["PATH"] = str(tools or tmp_path / "empty")
    (tmp_path / "empty").mkdir(exist_ok=True)
    env.pop("ROCM_PATH", None)
    env.update(extra_env or {})
    return subprocess.run(nova_command("setup-torch", "--dry-run", *args), env=env,
                          capture_output=True, text=True, timeout=60, check=False)


def commands(proc: subprocess.CompletedProcess) -> list[str]:
    assert proc.returncode == 0, proc.stderr
    return [line.replace(sys.executable, "PY") for line in proc.stdout.splitlines()]


def test_this_cpu_only_machine_gets_the_cpu_build(tmp_path):
    """The real detection, with this machine's PATH: no NVIDIA or AMD tool here."""
    if shutil.which("nvidia-smi") or shutil.which("rocminfo") or sys.platform != "linux":
        pytest.skip("this machine has a GPU tool (or is not Linux): the CPU case is faked below")
    env = process_env(nova_env("redis://127.0.0.1:1/0", "n", tmp_path))
    proc = subprocess.run(nova_command("setup-torch", "--dry-run"), env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert commands(proc)[-1] == (f"PY -m pip install --index-url {PYTORCH_INDEX}/cpu "
                                  f"torch=={DEFAULT_TORCH}+cpu")
    assert "no NVIDIA GPU" in proc.stderr and "no AMD GPU" in proc.stderr


def test_no_gpu_tool_means_the_cpu_build(tmp_path):
    out = commands(setup_torch(tmp_path, "--torch-version", "2.12.1"))
    assert out[-1] == f"PY -m pip install --index-url {PYTORCH_INDEX}/cpu torch==2.12.1+cpu"
    assert not any("cu" in line.split("whl/")[-1] for line in out)


def test_an_nvidia_driver_means_light_the_torch_picks_the_cuda_build(tmp_path):
    tools = tmp_path / "bin"
    tool(tools, "nvidia-smi", "550.54.14")
    tool(tools, "rocminfo", ROCMINFO_CPU)
    proc = setup_torch(tmp_path, tools=tools)
    assert commands(proc)[-2:] == ["PY -m pip install light-the-torch",
                                   f"PY -m light_the_torch install torch=={DEFAULT_TORCH}"]
    assert "NVIDIA driver 550.54.14" in proc.stderr
    # the CPU build, when asked for, even there
    assert "whl/cpu" in commands(setup_torch(tmp_path, "--backend", "cpu", tools=tools))[-1]


def test_an_amd_gpu_means_the_rocm_index_of_its_release(tmp_path):
    tools, rocm = tmp_path / "bin", tmp_path / "rocm"
    tool(tools, "rocminfo", ROCMINFO_GPU)
    (rocm / ".info").mkdir(parents=True)
    (rocm / ".info" / "version").write_text("6.4.1-120\n")
    out = commands(setup_torch(tmp_path, tools=tools, extra_env={"ROCM_PATH": str(rocm)}))
    assert out[-1] == (f"PY -m pip install --index-url {PYTORCH_INDEX}/rocm6.4 "
                       f"torch=={DEFAULT_TORCH}+rocm6.4")
    # a GPU whose ROCm release cannot be read: said, not guessed
    proc = setup_torch(tmp_path, tools=tools, extra_env={"ROCM_PATH": str(tmp_path / "none")})
    assert proc.returncode == 1 and "ROCm release is unknown" in proc.stderr


@pytest.mark.parametrize("backend, needle", [
    ("cuda", "no NVIDIA GPU here"), ("rocm", "no AMD GPU here"), ("mps", "Apple silicon")])
def test_a_backend_the_machine_lacks_is_refused(tmp_path, backend, needle):
    tools = tmp_path / "bin"
    tool(tools, "nvidia-smi", "NVIDIA-SMI has failed: no devices were found", code=9)
    tool(tools, "rocminfo", ROCMINFO_CPU)
    proc = setup_torch(tmp_path, "--backend", backend, tools=tools)
    assert proc.returncode == 1 and proc.stdout == "", proc.stdout
    assert needle in proc.stderr and "Traceback" not in proc.stderr


def test_bad_torch_version_is_refused(tmp_path):
    proc = setup_torch(tmp_path, "--torch-version", "latest; rm -rf /")
    assert proc.returncode == 1 and "--torch-version" in proc.stderr and proc.stdout == ""


def test_apple_silicon_gets_pypis_build_with_metal():
    mac = Machine("Darwin", "arm64")
    assert torch_setup.choose(mac) == "mps"
    assert torch_setup.pip_commands("mps", mac, "2.13.0", "PY") == [
        ["PY", "-m", "pip", "install", "torch==2.13.0"]]
    intel_mac = Machine("Darwin", "x86_64")
    assert torch_setup.choose(intel_mac) == "cpu"
    assert torch_setup.pip_commands("cpu", intel_mac, "2.13.0", "PY")[0][-1] == "torch==2.13.0"


@pytest.mark.parametrize("installed, backend, machine, fits", [
    ("2.13.0+cpu", "cpu", Machine("Linux", "x86_64"), True),
    ("2.13.0", "cpu", Machine("Linux", "x86_64"), False),  # PyPI's Linux build: CUDA
    ("2.13.0", "cuda", Machine("Linux", "x86_64", "550.1"), True),
    ("2.13.0+cu128", "cuda", Machine("Linux", "x86_64", "550.1"), True),
    ("2.13.0+cpu", "cuda", Machine("Linux", "x86_64", "550.1"), False),
    ("2.13.0+rocm6.4", "rocm", Machine("Linux", "x86_64", None, "6.4"), True),
    ("2.13.0+rocm6.3", "rocm", Machine("Linux", "x86_64", None, "6.4"), False),
    ("2.13.0", "mps", Machine("Darwin", "arm64"), True),
    ("2.12.1+cpu", "cpu", Machine("Linux", "x86_64"), False),  # another release
])
def test_an_installed_build_that_fits_is_kept(installed, backend, machine, fits):
    assert torch_setup.fits(installed, backend, machine, "2.13.0") is fits


def test_ci_and_the_cpu_image_install_the_default_release():
    """scripts/test installs torch with setup-torch (no release of its own), and the CPU
    image pins the same release."""
    script = (ROOT / "scripts" / "test").read_text()
    assert "nova_queue setup-torch --backend cpu" in script
    dockerfile = (ROOT / "workers" / "Dockerfile.cpu").read_text()
    assert f"ARG TORCH_VERSION={DEFAULT_TORCH}\n" in dockerfile


def test_a_txt2img_worker_without_torch_says_how_to_get_it(tmp_path, redis_url, namespace):
    """torch missing (a package that fails to import stands in for it): the worker stops at
    once, naming setup-torch, instead of joining and failing every task."""
    shadow = tmp_path / "shadow" / "torch"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n")
    env = process_env(nova_env(redis_url, namespace, tmp_path,
                               PYTHONPATH=str(tmp_path / "shadow")))
    proc = subprocess.run(nova_command("worker", "--app", "txt2img", "--no-benchmark"),
                          env=env, capture_output=True, text=True, timeout=90, check=False)
    assert proc.returncode == 1, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: txt2img needs torch") and "nova-queue setup-torch" in last
    assert "Traceback" not in proc.stderr
    assert os.path.isdir(tmp_path)  # nothing else to clean up: it never registered
