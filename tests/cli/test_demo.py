"""``nova-queue demo`` runs headless to completion in bounded time and leaves nothing behind."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from nova_queue.cli.demo_pool import bundled_prompts
from nova_queue.local import find_redis_server

pytestmark = pytest.mark.slow


def processes_mentioning(text: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{entry.name}: {cmdline}")
    return found


def test_bundled_prompts_are_64_and_varied():
    prompts = bundled_prompts()
    assert len(prompts) == 64 and len(set(prompts)) == 64
    assert any(not p.isascii() for p in prompts)


def test_redis_server_is_found():
    assert Path(find_redis_server(bundled=True)).exists()  # as the demo looks for it


def test_demo_runs_headless_with_a_kill_and_leaves_no_process(tmp_path):
    data = tmp_path / "demo-data"
    out = subprocess.run(
        [sys.executable, "-m", "nova_queue", "demo", "--no-browser", "--exit-when-done",
         "--prompts", "16", "--workers", "3", "--kill-one", "--port", "0", "--data", str(data)],
        capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    url = re.search(r"gallery: (http://127\.0\.0\.1:\d+/jobs/\w+)", out.stdout)
    assert url, out.stdout
    assert "--kill-one: killed worker" in out.stdout
    assert re.search(r"job \w+ done: 16 done, 0 failed", out.stdout), out.stdout
    assert "stopped everything the demo started" in out.stdout
    assert processes_mentioning(str(data)) == []  # no worker, web, post-worker or Redis left
    assert any((data / "results").rglob("*.png"))  # results kept with --data
    assert (data / "redis" / "appendonlydir").exists() or list((data / "redis").glob("*.aof"))


def test_demo_rejects_txt2img_without_a_model():
    out = subprocess.run([sys.executable, "-m", "nova_queue", "demo", "--no-browser",
                          "--app", "txt2img"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and out.stderr.startswith("error: --app txt2img needs --model")


def test_demo_cleans_up_its_temporary_folder_on_sigterm(tmp_path):
    import signal
    import time

    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-m", "nova_queue", "demo", "--no-browser",
                             "--prompts", "4", "--workers", "1", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        lines = []
        deadline = time.monotonic() + 120
        for line in proc.stdout:  # wait until the gallery is up
            lines.append(line)
            if line.startswith("gallery:") or time.monotonic() > deadline:
                break
        assert any(ln.startswith("gallery:") for ln in lines), "".join(lines)
        tmp_dirs = list(tmp_path.glob("nova-demo-*"))
        assert len(tmp_dirs) == 1
        proc.send_signal(signal.SIGTERM)
        rest = proc.communicate(timeout=60)[0]
        assert proc.returncode == 0, rest
        assert not tmp_dirs[0].exists()
        assert processes_mentioning(str(tmp_dirs[0])) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
