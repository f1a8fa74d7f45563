"""BullMQ side by side in the lifecycle-throughput section: installs pinned ``bullmq`` and
``ioredis`` with npm into a cached temp folder and runs ``bullmq_bench.js`` (P processes,
each one BullMQ Worker with concurrency C, on no-op jobs added beforehand with addBulk)
against the section's redis-server. Without ``node`` and ``npm`` on PATH, or when the install
fails, the section runs without it and says why (``setup()["note"]``)."""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import uuid
from pathlib import Path
from typing import IO, Any

from benchlib import HERE, log, per_task_scripts, redis_cpu_s, script_stats

from nova_queue.local import RedisServer

BULLMQ_VERSION = "6.7.0"
IOREDIS_VERSION = "6.0.0"
DRIVER = HERE / "bullmq_bench.js"
INSTALL_TIMEOUT_S = 300


def _cache_dir() -> Path:
    """Where the npm install is kept between runs (one folder per pinned pair)."""
    name = f"nova-bench-bullmq-{BULLMQ_VERSION}-ioredis-{IOREDIS_VERSION}"
    return Path(tempfile.gettempdir()) / name


def _installed(folder: Path, package: str) -> str | None:
    try:
        meta = json.loads((folder / "node_modules" / package / "package.json").read_text())
    except (OSError, ValueError):
        return None
    return str(meta.get("version"))


def _npm_install(folder: Path) -> str | None:
    """Install the pinned pair into ``folder`` (built aside, then renamed into place);
    returns None, or why it failed."""
    aside = Path(tempfile.mkdtemp(prefix=folder.name + "-", dir=folder.parent))
    log(f"throughput: npm install bullmq@{BULLMQ_VERSION} ioredis@{IOREDIS_VERSION} (cached "
        f"in {folder})")
    try:
        out = subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--no-progress", "--prefix", str(aside),
             f"bullmq@{BULLMQ_VERSION}", f"ioredis@{IOREDIS_VERSION}"],
            capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        shutil.rmtree(aside, ignore_errors=True)
        return f"npm install took over {INSTALL_TIMEOUT_S} s"
    if out.returncode != 0:
        shutil.rmtree(aside, ignore_errors=True)
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        return f"npm install failed (exit {out.returncode}): {tail}"
    shutil.rmtree(folder, ignore_errors=True)  # a broken earlier install
    try:
        os.replace(aside, folder)
    except OSError:  # another run installed it meanwhile
        shutil.rmtree(aside, ignore_errors=True)
        if _installed(folder, "bullmq") != BULLMQ_VERSION:
            return f"could not move the npm install into {folder}"
    return None


def setup() -> dict[str, Any]:
    """Node, npm and the cached install: ``{"available": True, versions…, "node_path"}``, or
    ``{"available": False, "note": why}``."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if not (node and npm):
        missing = " and ".join(n for n, p in (("node", node), ("npm", npm)) if not p)
        return {"available": False,
                "note": f"BullMQ not run: {missing} not on PATH (install Node.js with npm to "
                        "compare; the rest of the section is unaffected)"}
    folder = _cache_dir()
    if (_installed(folder, "bullmq"), _installed(folder, "ioredis")) != (BULLMQ_VERSION,
                                                                        IOREDIS_VERSION):
        why = _npm_install(folder)
        if why:
            return {"available": False, "note": f"BullMQ not run: {why}"}
    version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=60,
                             check=True).stdout.strip()
    return {"available": True, "bullmq": _installed(folder, "bullmq"),
            "ioredis": _installed(folder, "ioredis"), "node": version,
            "node_path": str(folder / "node_modules")}


def _reader(stream: IO[str]) -> queue.Queue:
    """The process's stdout lines, read by a thread (a read with a deadline is a get)."""
    lines: queue.Queue = queue.Queue()

    def pump() -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def _expect(lines: queue.Queue, event: str, timeout_s: float, stderr: Path) -> dict[str, Any]:
    try:
        line = lines.get(timeout=timeout_s)
    except queue.Empty:
        line = None
    msg = json.loads(line) if line else {}
    if msg.get("event") != event:
        tail = stderr.read_text(errors="replace").strip()[-500:]
        raise RuntimeError(f"bullmq_bench.js: expected {event!r}, got {line!r}: {tail}")
    return msg


def rate(server: RedisServer, bull: dict[str, Any], processes: int, concurrency: int,
         n_jobs: int, folder: Path) -> dict[str, Any]:
    """BullMQ no-op jobs per second with ``processes`` Workers of ``concurrency`` each; Redis
    CPU per job = the redis-server process's CPU from the start signal to the last job."""
    name = f"tp{processes}c{concurrency}{uuid.uuid4().hex[:6]}"
    folder.mkdir(parents=True, exist_ok=True)
    stderr = folder / f"bullmq-{name}.log"
    argv = ["node", str(DRIVER), "--port", str(server.port), "--queue", name,
            "--jobs", str(n_jobs), "--processes", str(processes),
            "--concurrency", str(concurrency)]
    env = {**os.environ, "NODE_PATH": bull["node_path"]}
    r = server.client()
    with open(stderr, "wb") as err:
        proc = subprocess.Popen(argv, env=env, cwd=folder, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        lines = _reader(proc.stdout)
        _expect(lines, "ready", 300, stderr)  # jobs added, every Worker connected
        r.config_resetstat()
        cpu0 = redis_cpu_s(r)
        proc.stdin.write("go\n")
        proc.stdin.flush()
        _expect(lines, "done", 600, stderr)
        cpu1 = redis_cpu_s(r)
        scripts = script_stats(r)  # its figures per job as nova's (throughput.py)
        res = _expect(lines, "result", 120, stderr)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    if res["jobs"] != n_jobs:
        raise RuntimeError(f"BullMQ throughput: {res['jobs']} of {n_jobs} jobs completed")
    keys = list(r.scan_iter(match=f"bull:{name}:*", count=1000))
    for lo in range(0, len(keys), 1000):
        r.unlink(*keys[lo:lo + 1000])
    r.close()
    return {"processes": processes, "concurrency": concurrency, "tasks": n_jobs,
            "seconds": res["seconds"], "tasks_per_s": res["jobs_per_s"],
            "redis_cpu_us_per_task": (cpu1 - cpu0) / n_jobs * 1e6,
            **per_task_scripts(scripts, n_jobs)}
