"""The wheel installs nova_queue, nova_queue.web and nova_queue.workers — and nothing else."""

from __future__ import annotations

import json
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(out), str(ROOT)], check=True, timeout=300,
                   capture_output=True)
    (found,) = out.glob("nova_queue-*.whl")
    return found


def test_wheel_contents(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.startswith("nova_queue-")}
    assert tops == {"nova_queue"}  # no top-level web/ or workers/ module
    for needed in ("nova_queue/lua/claim-12.lua", "nova_queue/lua/includes/release.lua",
                   "nova_queue/web/templates/job.html", "nova_queue/web/static/style.css",
                   "nova_queue/workers/runtime.py", "nova_queue/data/prompts.txt",
                   "nova_queue/py.typed"):
        assert needed in names, needed
    assert not any(n.startswith("nova_queue/tests") or "Dockerfile" in n for n in names)
    # every module of the checkout is in the wheel, under its installed name
    for folder, package in (("nova_queue", "nova_queue"), ("web", "nova_queue/web"),
                            ("workers", "nova_queue/workers")):
        for module in (ROOT / folder).rglob("*.py"):
            rel = module.relative_to(ROOT / folder).as_posix()
            if folder == "nova_queue" and rel.split("/")[0] in ("web", "workers"):
                continue
            assert f"{package}/{rel}" in names, f"{package}/{rel} missing from the wheel"
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry).decode()
    assert "nova-queue = nova_queue.cli:main" in text and "[nova_queue.apps]" in text


def requirements(wheel: Path) -> dict[str, list[str]]:
    """The wheel's Requires-Dist lines by extra ("" for the core)."""
    archive = zipfile.ZipFile(wheel)
    text = archive.read(next(n for n in archive.namelist()
                             if n.endswith(".dist-info/METADATA"))).decode()
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line.startswith("Requires-Dist: "):
            req, _, marker = line.removeprefix("Requires-Dist: ").partition(";")
            extra = marker.split("extra ==")[-1].strip().strip("'\"") if marker else ""
            out.setdefault(extra, []).append(req.strip())
    return out


def test_rq_is_the_post_extra_and_pillow_is_core(wheel):
    """RQ is only the post-worker's (``post``, in ``demo`` and ``all``); Pillow stays core:
    the default synthetic app draws its cards with it (pyproject.toml says why)."""
    reqs = requirements(wheel)
    named = {extra: {r.split("[")[0].split(">")[0].strip().lower() for r in rs}
             for extra, rs in reqs.items()}
    assert [extra for extra, names in named.items() if "rq" in names] == ["post"]
    assert "pillow" in named[""] and "redis" in named[""]
    assert any("nova-queue[post]" in r for r in reqs["demo"])
    assert any("post" in r for r in reqs["all"] if r.startswith("nova-queue["))


def test_fresh_venv_imports_from_outside_the_repo(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(wheel)],
                   check=True, timeout=300, capture_output=True)
    # dependencies come from this environment's site-packages (no .pth processing there,
    # so the editable install of the checkout is not visible)
    env = {"PYTHONPATH": ":".join(site.getsitepackages()), "PATH": "/usr/bin:/bin"}
    code = (
        "import json, importlib, nova_queue, nova_queue.web.app, nova_queue.workers.runtime\n"
        "from nova_queue.scripts import script_sources\n"
        "out = {'file': nova_queue.__file__, 'scripts': len(script_sources())}\n"
        "for name in ('web', 'workers'):\n"
        "    try:\n"
        "        importlib.import_module(name); out[name] = 'importable'\n"
        "    except ImportError:\n"
        "        out[name] = 'absent'\n"
        "print(json.dumps(out))\n"
    )
    res = subprocess.run([str(py), "-c", code], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    commands = len(list((ROOT / "nova_queue" / "lua").glob("*-*.lua")))
    assert out["file"].startswith(str(venv)) and out["scripts"] == commands >= 12
    assert out["web"] == "absent" and out["workers"] == "absent"
    cli = subprocess.run([str(venv / "bin" / "nova-queue"), "--version"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=60, check=False)
    assert cli.returncode == 0 and "nova-queue, version" in cli.stdout
