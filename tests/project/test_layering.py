"""The core never imports flask, torch, diffusers, or the web and worker layers; the source
folders web/ and workers/ are never top-level modules, not even inside the test session."""

import importlib
import json
import pkgutil
import subprocess
import sys

import pytest

import nova_queue

FORBIDDEN = ["flask", "flask_sock", "torch", "diffusers", "transformers", "boto3",
             "nova_queue.web", "nova_queue.workers"]
TOP_LAYERS = {"nova_queue.cli", "nova_queue.demo", "nova_queue.__main__"}


def core_modules() -> list[str]:
    mods = ["nova_queue"]
    for info in pkgutil.walk_packages(nova_queue.__path__, "nova_queue."):
        name = info.name
        if name.startswith(("nova_queue.web", "nova_queue.workers")) or name in TOP_LAYERS:
            continue
        if name.startswith(tuple(m + "." for m in TOP_LAYERS)):
            continue
        mods.append(name)
    return mods


def test_core_imports_stay_light():
    mods = core_modules()
    assert "nova_queue.client" in mods and "nova_queue.apps.txt2img" in mods
    code = (
        "import importlib, json, sys\n"
        f"for m in {mods!r}: importlib.import_module(m)\n"
        f"print(json.dumps([f for f in {FORBIDDEN!r} if f in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []


def loaded_after(code: str, watched: list[str]) -> list[str]:
    """Which of ``watched`` are in ``sys.modules`` after ``code`` ran in a fresh interpreter."""
    script = (f"{code}\nimport json, sys\n"
              f"print(json.dumps([m for m in {watched!r} if m in sys.modules]))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


def test_web_imports_neither_rq_pillow_torch_nor_the_worker_runtime():
    code = (
        "import importlib, pkgutil\n"
        "import nova_queue.web as w\n"
        "for i in pkgutil.walk_packages(w.__path__, 'nova_queue.web.'):\n"
        "    importlib.import_module(i.name)\n"
        "from nova_queue.web import create_app\n"
        "create_app({'TESTING': True})\n"
    )
    watched = ["rq", "PIL", "torch", "diffusers", "nova_queue.workers"]
    assert loaded_after(code, watched) == []


def test_worker_runtime_imports_neither_rq_nor_pillow():
    """The worker never touches RQ (the post-worker is its only producer); Pillow and torch
    come with the app runners that need them, when the worker loads them."""
    watched = ["rq", "PIL", "torch", "diffusers", "nova_queue.post.queue",
               "nova_queue.workers.apps.synthetic"]
    assert loaded_after("import nova_queue.workers.runtime", watched) == []


def test_specs_cli_and_artifact_names_import_neither_rq_nor_pillow():
    """The web and the CLI use app specs and artifact names without RQ or Pillow."""
    code = ("import nova_queue.cli, nova_queue.post\n"
            "from nova_queue.apps import available_apps, load_app\n"
            "for name in available_apps():\n"
            "    load_app(name).parse_params({})\n")
    assert loaded_after(code, ["rq", "PIL", "torch", "nova_queue.workers"]) == []


@pytest.mark.parametrize("name", ["web", "workers"])
def test_no_top_level_web_or_workers_module_in_the_test_session(name):
    """A stray ``import web`` must fail here as it does for users (STYLE.md rule 13): no
    conftest.py at the root, no __init__.py in tests/, and ``python -m pytest`` from the
    checkout does not leave the checkout on sys.path (tests/conftest.py)."""
    assert name not in sys.modules
    with pytest.raises(ImportError):
        importlib.import_module(name)
    assert importlib.import_module(f"nova_queue.{name}").__name__ == f"nova_queue.{name}"
