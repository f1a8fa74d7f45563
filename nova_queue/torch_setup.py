"""``nova-queue setup-torch``: the torch build that fits this machine, and the pip commands
that install it.

An index's default torch does not fit most machines: PyPI's Linux wheel bundles CUDA (GBs
that a CPU machine never uses) and no index serves ROCm builds by default. So a worker
machine installs torch before the ``txt2img`` extra, whose ``torch`` requirement the
build then meets:

===========  =================================================  ==========================
machine      detected by                                        build
===========  =================================================  ==========================
NVIDIA GPU   ``nvidia-smi`` reports a driver                    light-the-torch picks the
                                                                newest CUDA build the
                                                                driver runs
AMD GPU      ``rocminfo`` lists a ``gfx`` agent; the ROCm        PyTorch's ROCm index of
             release from ``$ROCM_PATH/.info/version``          that release
Apple        macOS on arm64                                     PyPI's (Metal, MPS)
otherwise    -                                                  PyTorch's CPU index
                                                                (PyPI's on macOS)
===========  =================================================  ==========================

A CUDA build is chosen only where ``nvidia-smi`` answers: ``--backend cuda`` elsewhere is
refused. The CUDA case is light-the-torch's job (``ltt install``: it reads the driver
version and knows which CUDA releases it runs and which builds PyTorch publishes); it is
installed for that step only, not as a dependency of nova-queue, because it caps pip's
version (``pip<26.1`` in 0.8.1, it patches pip's internals), so depending on it would
downgrade pip on every machine. The other cases need no table: the CPU and ROCm builds
carry their backend in the version (``2.13.0+cpu``, ``+rocm6.4``), which the command
pins, so pip cannot fall back to another build from another index or a wheelhouse.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from nova_queue.errors import InputError

#: The torch release installed unless ``--torch-version`` names another: the one the test
#: suite runs (``scripts/test``) and the CPU image installs (``workers/Dockerfile.cpu``).
DEFAULT_TORCH = "2.13.0"
PYTORCH_INDEX = "https://download.pytorch.org/whl"
BACKENDS = ("auto", "cpu", "cuda", "rocm", "mps")
#: Longest a detection command may take.
PROBE_TIMEOUT_S = 20
VERSION_RE = re.compile(r"^\d+\.\d+(\.\d+)?$")


@dataclasses.dataclass(frozen=True)
class Machine:
    """What decides the build: the OS, the CPU architecture, the NVIDIA driver (None: no
    NVIDIA GPU) and the ROCm release (None: no AMD GPU; "": a GPU, release unknown)."""

    system: str
    arch: str
    nvidia_driver: str | None = None
    rocm_release: str | None = None

    def describe(self) -> str:
        """One line: what was found."""
        gpu = (f"NVIDIA driver {self.nvidia_driver}" if self.nvidia_driver
               else "no NVIDIA GPU (nvidia-smi found none)")
        amd = (f"ROCm {self.rocm_release or '(release unknown)'}" if self.rocm_release is not None
               else "no AMD GPU (rocminfo found none)")
        return f"{self.system} {self.arch}, {gpu}, {amd}"


def _run(args: list[str]) -> str | None:
    """A detection command's output, or None when it is missing or fails."""
    exe = shutil.which(args[0])
    if exe is None:
        return None
    try:
        proc = subprocess.run([exe, *args[1:]], capture_output=True, text=True,
                              timeout=PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def nvidia_driver() -> str | None:
    """The NVIDIA driver version ``nvidia-smi`` reports, else None."""
    out = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    lines = [x.strip() for x in (out or "").splitlines() if x.strip()]
    return lines[0] if lines else None


def rocm_release() -> str | None:
    """The ROCm release ("6.4") when ``rocminfo`` lists a GPU (gfx) agent; "" when it does
    but the release cannot be read; None when there is no AMD GPU."""
    out = _run(["rocminfo"])
    if not out or not re.search(r"^\s*Name:\s+gfx\d", out, re.MULTILINE):
        return None
    root = Path(os.environ.get("ROCM_PATH") or "/opt/rocm")
    try:
        text = (root / ".info" / "version").read_text()
    except OSError:
        return ""
    found = re.match(r"\s*(\d+)\.(\d+)", text)
    return f"{found.group(1)}.{found.group(2)}" if found else ""


def detect() -> Machine:
    """This machine."""
    return Machine(platform.system(), platform.machine().lower(), nvidia_driver(),
                   rocm_release())


def choose(machine: Machine, backend: str = "auto") -> str:
    """The backend to install for (``auto``: the best one found); InputError when the one
    asked for does not fit the machine."""
    apple = machine.system == "Darwin" and machine.arch in ("arm64", "aarch64")
    if backend == "auto":
        if machine.nvidia_driver:
            return "cuda"
        if machine.rocm_release is not None:
            return "rocm"
        return "mps" if apple else "cpu"
    if backend == "cuda" and not machine.nvidia_driver:
        raise InputError("--backend cuda: no NVIDIA GPU here (nvidia-smi reports no driver), "
                         "and a CUDA build would not run; use --backend auto or cpu")
    if backend == "rocm" and machine.rocm_release is None:
        raise InputError("--backend rocm: no AMD GPU here (rocminfo lists no gfx agent); use "
                         "--backend auto or cpu")
    if backend == "mps" and not apple:
        raise InputError("--backend mps: Metal (MPS) needs macOS on Apple silicon; use "
                         "--backend auto or cpu")
    if backend not in BACKENDS:
        raise InputError(f"--backend {backend!r}: one of {', '.join(BACKENDS)}")
    return backend


def pip_commands(backend: str, machine: Machine, version: str = DEFAULT_TORCH,
                 python: str = sys.executable) -> list[list[str]]:
    """The commands that install torch ``version`` for ``backend`` on ``machine``."""
    if not VERSION_RE.match(version):
        raise InputError(f"--torch-version {version!r}: a release such as {DEFAULT_TORCH}")
    pip = [python, "-m", "pip", "install"]
    if backend == "cuda":
        return [[*pip, "light-the-torch"],
                [python, "-m", "light_the_torch", "install", f"torch=={version}"]]
    if backend == "rocm":
        if not machine.rocm_release:
            raise InputError("an AMD GPU is here but its ROCm release is unknown (no "
                             "$ROCM_PATH/.info/version): install torch from "
                             f"{PYTORCH_INDEX}/rocmX.Y for your release")
        tag = f"rocm{machine.rocm_release}"
        return [[*pip, "--index-url", f"{PYTORCH_INDEX}/{tag}", f"torch=={version}+{tag}"]]
    if backend == "mps" or machine.system == "Darwin":  # macOS: PyPI's builds are CPU + Metal
        return [[*pip, f"torch=={version}"]]
    return [[*pip, "--index-url", f"{PYTORCH_INDEX}/cpu", f"torch=={version}+cpu"]]


def installed_torch() -> str | None:
    """The installed torch's version (``2.13.0+cpu``), else None."""
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def fits(installed: str, backend: str, machine: Machine, version: str) -> bool:
    """Whether an installed torch ``installed`` is the build ``pip_commands`` would install
    (the CUDA case: any CUDA build of that release)."""
    public, _, local = installed.partition("+")
    if public != version:
        return False
    if backend == "mps" or machine.system == "Darwin":
        return local == ""
    if backend == "cpu":
        return local == "cpu"
    if backend == "rocm":
        return local == f"rocm{machine.rocm_release}"
    return local.startswith("cu") or (local == "" and machine.system == "Linux")
