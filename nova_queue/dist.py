"""The pool's own package as a wheel, which the gateway serves to the machines that join it.

nova-queue is on no public index, and a worker must run the release its gateway runs; so a
joining machine installs the wheel the gateway serves (``/v1/dist/``, ``gateway/dist.py``).
The wheel is made from whatever this nova-queue was installed from, so that every install
can serve it, a wheel installed from another gateway included:

- **an installed wheel** (``pip install`` of a wheel or a folder, a docker image, a wheel
  from a gateway): the installed files are packed again into a wheel (:func:`repack`): the
  files its ``RECORD`` lists under ``site-packages``, byte for byte (each checked against
  the hash ``RECORD`` holds: a file changed after the install is refused), with the
  dist-info's ``METADATA``, ``WHEEL`` and entry points, and a new ``RECORD``. No build
  tool runs and nothing is compiled, so the same wheel comes out on every machine;
- **a checkout** (``nova_queue`` imported from one, as an editable install does): its
  sources are copied to a temporary folder (the files :data:`CHECKOUT_FILES` names, without
  caches; the checkout itself is not written to) and built there with ``pip wheel
  --no-deps --no-build-isolation`` (setuptools and wheel from this environment, as ``pip
  install -e .`` needed them).

Either way the wheel goes to a cache folder, ``<NOVA_HOME>/.nova/dist/<fingerprint>/``,
named by a hash of what it is made of: a restart finds it there, a changed checkout is
built again. Keeping a built wheel inside the package instead is impossible (a wheel
cannot contain itself), and building from an installed package's files would need the
sources a wheel does not carry (``pyproject.toml``, the ``web/`` and ``workers/``
folders' layout).
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import email.parser
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import zipfile
from importlib import metadata
from pathlib import Path

import nova_queue
from nova_queue.errors import ConfigError

try:
    import fcntl
except ImportError:  # Windows: no lock (each process makes its own)
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

DIST_NAME = "nova-queue"
#: What a checkout's wheel is built from (the folders as ``[tool.setuptools.package-dir]``
#: maps them; ``tests/project/test_packaging.py`` checks the wheel holds every module).
CHECKOUT_FILES = ("pyproject.toml", "README.md", "nova_queue", "web", "workers")
#: Left out of a copied checkout and of a repacked wheel.
SKIPPED_PARTS = ("__pycache__", ".egg-info", ".pyc")
#: dist-info files an installer writes (not part of the wheel it installed).
INSTALLER_FILES = ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json")
#: Longest a checkout's build may take.
BUILD_TIMEOUT_S = 600
#: Every file in the zip gets this time, so a repacked wheel is the same bytes each time.
ZIP_TIME = (1980, 1, 1, 0, 0, 0)


def wheel_name(version: str) -> str:
    """The file name of nova-queue ``version``'s wheel (pure Python, any platform)."""
    return f"nova_queue-{version}-py3-none-any.whl"


@dataclasses.dataclass(frozen=True)
class Source:
    """What this nova-queue's wheel is made from: ``kind`` is ``"installed"`` (``dist`` is
    the installed distribution) or ``"checkout"`` (``root`` is the checkout)."""

    kind: str
    root: Path | None = None
    dist: metadata.Distribution | None = None


def find_source() -> Source:
    """Where this nova-queue comes from (ConfigError when it cannot make a wheel): the
    checkout it is imported from (an editable install imports from it too), else the
    installed distribution in the folder it is imported from (not any other one on the
    path, such as a checkout's ``.egg-info`` in the current directory)."""
    package_root = Path(nova_queue.__file__).resolve().parent.parent
    if (package_root / "pyproject.toml").is_file() and (package_root / "workers").is_dir():
        return Source("checkout", root=package_root)
    for dist in metadata.distributions(name=DIST_NAME, path=[str(package_root)]):
        if dist.read_text("RECORD"):
            return Source("installed", dist=dist)
    raise ConfigError(f"cannot find the files nova-queue {nova_queue.__version__} was installed "
                      f"from in {package_root}, to make its wheel")


def fingerprint(source: Source) -> str:
    """A hash of what the wheel is made of (its cache folder's name)."""
    digest = hashlib.sha256(nova_queue.__version__.encode())
    if source.kind == "installed":
        assert source.dist is not None
        digest.update((source.dist.read_text("RECORD") or "").encode())
    else:
        assert source.root is not None
        for rel, path in _checkout_files(source.root):
            digest.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:24]


def _checkout_files(root: Path) -> list[tuple[str, Path]]:
    """(relative path, path) of every file :data:`CHECKOUT_FILES` names, caches skipped."""
    out: list[tuple[str, Path]] = []
    for name in CHECKOUT_FILES:
        top = root / name
        paths = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
        for path in paths:
            rel = path.relative_to(root).as_posix()
            if not any(part in rel for part in SKIPPED_PARTS):
                out.append((rel, path))
    return out


def make_wheel(cache_dir: Path, source: Source | None = None) -> Path:
    """The wheel of this nova-queue, from the cache or made now (ConfigError if it cannot).
    Processes sharing the cache folder make it one at a time (a lock the system releases
    if one dies), so the others find it made."""
    source = source or find_source()
    folder = Path(cache_dir) / fingerprint(source)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / ".lock", "a+b") as lock:
        if fcntl is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)
        found = sorted(folder.glob("nova_queue-*.whl")) if folder.is_dir() else []
        if not found:
            _make_into(folder, source)
            found = sorted(folder.glob("nova_queue-*.whl"))
        if not found:
            raise ConfigError(f"no wheel in {folder} after making it")
        _forget_others(folder)
    return found[0]


def _make_into(folder: Path, source: Source) -> None:
    """Make the wheel in a staging folder, then rename it to ``folder`` (never half there)."""
    shutil.rmtree(folder, ignore_errors=True)  # a folder without its wheel: made again
    staging = Path(tempfile.mkdtemp(prefix=".building-", dir=folder.parent))
    try:
        if source.kind == "installed":
            assert source.dist is not None
            repack(source.dist, staging)
        else:
            assert source.root is not None
            build_checkout(source.root, staging)
        staging.rename(folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _forget_others(keep: Path) -> None:
    """Remove what else is in the cache: older wheels (other fingerprints), and staging
    folders a killed process left (the lock is held: no one else is making one)."""
    for other in keep.parent.iterdir():
        if other != keep and other.is_dir():
            shutil.rmtree(other, ignore_errors=True)


def repack(dist: metadata.Distribution, out_dir: Path) -> Path:
    """Pack an installed distribution's files into a wheel in ``out_dir``; returns its path."""
    entries: list[tuple[str, bytes]] = []
    for file in dist.files or []:
        rel = file.as_posix()
        if rel.startswith("../") or any(part in rel for part in SKIPPED_PARTS):
            continue  # a console script outside site-packages, or a cache
        if ".dist-info/" in rel and rel.rsplit("/", 1)[1] in INSTALLER_FILES:
            continue
        data = Path(str(dist.locate_file(file))).read_bytes()
        if file.hash is not None and file.hash.mode == "sha256" and _b64(
                hashlib.sha256(data).digest()) != file.hash.value:
            raise ConfigError(f"the installed file {rel} differs from what was installed: "
                              f"reinstall nova-queue {dist.version}")
        entries.append((rel, data))
    info = {rel.split("/", 1)[0] for rel, _ in entries if ".dist-info/" in rel}
    if len(info) != 1:
        raise ConfigError("the installed nova-queue has no single .dist-info folder to repack")
    path = Path(out_dir) / wheel_name(dist.version)
    write_wheel(path, entries, info.pop())
    return path


def write_wheel(path: Path, entries: list[tuple[str, bytes]], dist_info: str) -> None:
    """A wheel of ``entries`` (path, bytes) with a RECORD, in a stable order and time."""
    entries = sorted(entries, key=lambda e: (e[0].startswith(dist_info + "/"), e[0]))
    record = [f"{rel},sha256={_b64(hashlib.sha256(data).digest())},{len(data)}"
              for rel, data in entries]
    record.append(f"{dist_info}/RECORD,,")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for rel, data in [*entries, (f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode())]:
            item = zipfile.ZipInfo(rel, ZIP_TIME)
            item.external_attr = 0o644 << 16
            item.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(item, data)


def requires_python(wheel: Path) -> str:
    """The ``Requires-Python`` of a wheel's METADATA ("" if it names none)."""
    with zipfile.ZipFile(wheel) as zf:
        name = next((n for n in zf.namelist() if n.endswith(".dist-info/METADATA")), None)
        text = zf.read(name).decode() if name else ""
    return str(email.parser.Parser().parsestr(text, headersonly=True).get("Requires-Python")
               or "")


def _b64(digest: bytes) -> str:
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def build_checkout(root: Path, out_dir: Path) -> Path:
    """Build a checkout's wheel in ``out_dir`` from a copy of its sources."""
    with tempfile.TemporaryDirectory(prefix="nova-src-") as tmp:
        src = Path(tmp) / "nova-queue"
        for rel, path in _checkout_files(root):
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, src / rel)
        # absolute paths: pip reads a bare word as a requirement to download
        cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
               "--quiet", "--disable-pip-version-check", "-w", str(Path(out_dir).resolve()),
               str(src.resolve())]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S,
                                  check=False, preexec_fn=_lower_priority)
        except subprocess.TimeoutExpired:
            raise ConfigError(f"building the wheel took over {BUILD_TIMEOUT_S} s") from None
    built = sorted(Path(out_dir).glob("nova_queue-*.whl"))
    if proc.returncode != 0 or not built:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise ConfigError(f"could not build the wheel of the checkout {root} (pip wheel "
                          f"--no-build-isolation needs setuptools and wheel): {tail}")
    return built[0]


def _lower_priority() -> None:  # pragma: no cover - runs in the child
    """The build runs beside a serving gateway: let it have the CPU first."""
    with contextlib.suppress(OSError, AttributeError):
        os.nice(10)


class WheelCache:
    """The gateway's wheel: made once, in a background thread (:meth:`start`), from the
    cache when it is there. Thread-safe."""

    def __init__(self, cache_dir: Path):
        self.cache_dir = Path(cache_dir)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.path: Path | None = None
        #: the wheel's SHA-256 (hex) and its Requires-Python (the simple index shows both)
        self.sha256 = ""
        self.requires_python = ""
        #: why no wheel can be served ("": none yet, or none failed)
        self.error = ""

    def start(self) -> None:
        """Make the wheel in the background unless it is made or being made."""
        with self._lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._make, name="nova-wheel", daemon=True)
            self._thread.start()

    def _make(self) -> None:
        try:
            path = make_wheel(self.cache_dir)
        except (ConfigError, OSError) as exc:
            self.error = str(exc)
            log.warning("the gateway cannot serve its wheel: %s", exc)
            return
        self.sha256 = hashlib.sha256(path.read_bytes()).hexdigest()
        self.requires_python = requires_python(path)
        self.path = path
        log.info("serving nova-queue %s to joining machines: /v1/dist/%s",
                 nova_queue.__version__, path.name)

    def wait(self, timeout_s: float) -> Path | None:
        """The wheel once made (starting it), or None after ``timeout_s``."""
        self.start()
        assert self._thread is not None
        self._thread.join(timeout_s)
        return self.path
