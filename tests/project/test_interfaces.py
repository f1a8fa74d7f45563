"""One interface per role, one definition per idea (STYLE.md), read from the source:

- the worker runtime holds one transport (``workers/transport.py``) and never asks which:
  no ``gateway`` flag, no ``isinstance`` against a transport class, no gateway class named
  outside the transport and the link, and no result store of its own (a store whose reads
  always refuse was the gateway worker's);
- the runtime's modules use one another through public names only (the task slots once
  called the executor's ``_lost``, ``_take_result`` and ``_flush``), and so do the client's
  parts and the doctor (which once ran its scripts through the client's private ``_call``);
- the commit's wire names (content type and headers) are defined once, in
  ``nova_queue/wire.py``, and every other module reads them there (no copies, no aliases).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = ROOT / "workers"
#: where the two transports are made: the only modules that may name them
TRANSPORTS = {"transport.py", "link.py"}
TRANSPORT_CLASSES = {"NovaClient", "GatewayLink", "GatewayStore", "DirectTransport"}
#: private names of other modules that are the standard library's own API
ALLOWED_PRIVATE = {"os._exit"}
WIRE_NAMES = ("application/x-nova-commit", "X-Nova-Commit-Length", "X-Nova-Task")


def _trees(folder: Path, skip: set[str] = frozenset()) -> list[tuple[Path, ast.AST]]:
    return [(p, ast.parse(p.read_text(encoding="utf-8"))) for p in sorted(folder.rglob("*.py"))
            if p.name not in skip]


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}


def asked_which(path: Path, tree: ast.AST, root: Path = ROOT) -> list[str]:
    """Where a module of the runtime asks which transport it holds."""
    rel = path.relative_to(root)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "gateway":
            found.append(f"{rel}:{node.lineno} .gateway")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("isinstance", "issubclass") and len(node.args) == 2
              and _names(node.args[1]) & TRANSPORT_CLASSES):
            found.append(f"{rel}:{node.lineno} {ast.unparse(node)}")
        elif isinstance(node, ast.Name) and node.id in TRANSPORT_CLASSES - {"NovaClient"}:
            found.append(f"{rel}:{node.lineno} {node.id}")
        elif isinstance(node, ast.ClassDef) and "ResultStore" in _names(
                ast.Tuple(elts=node.bases)):
            found.append(f"{rel}:{node.lineno} class {node.name}(ResultStore)")
    return found


def test_the_worker_runtime_never_asks_which_transport_it_holds():
    trees = _trees(RUNTIME, TRANSPORTS)
    assert len(trees) > 10 and any(p.name == "runtime.py" for p, _ in trees)
    assert [f for path, tree in trees for f in asked_which(path, tree)] == []


def test_the_check_finds_each_way_of_asking(tmp_path):
    source = ("class GatewayStore(ResultStore):\n"
              "    def get(self, key):\n"
              "        raise StoreError('a worker behind a gateway reads no objects')\n"
              "def f(self, client):\n"
              "    if self.gateway:\n"
              "        return isinstance(client, (NovaClient, int)), GatewayLink\n")
    path = tmp_path / "asks.py"
    path.write_text(source)
    assert sorted(asked_which(path, ast.parse(source), tmp_path)) == sorted([
        "asks.py:1 class GatewayStore(ResultStore)", "asks.py:5 .gateway",
        "asks.py:6 isinstance(client, (NovaClient, int))", "asks.py:6 GatewayLink"])


def private_uses(path: Path, tree: ast.AST) -> list[str]:
    """``x._name`` where ``x`` is not ``self`` or ``cls``: another object's private name."""
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
                and ast.unparse(node) not in ALLOWED_PRIVATE):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(node)}")
    return found


def test_the_runtime_uses_no_private_name_of_another_object():
    assert [f for path, tree in _trees(RUNTIME) for f in private_uses(path, tree)] == []


def test_the_clients_parts_and_the_doctor_use_no_private_name_of_another_object():
    trees = _trees(ROOT / "nova_queue" / "client") + _trees(ROOT / "nova_queue" / "doctor")
    assert len(trees) >= 10
    assert [f for path, tree in trees for f in private_uses(path, tree)] == []


def test_the_commit_wire_names_are_defined_once():
    wire = ROOT / "nova_queue" / "wire.py"
    found = []
    for folder in ("nova_queue", "workers", "web"):
        for path, tree in _trees(ROOT / folder):
            for node in ast.walk(tree):
                if (path != wire and isinstance(node, ast.Constant)
                        and node.value in WIRE_NAMES):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}")
                elif (isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute)
                      and isinstance(node.value.value, ast.Name)
                      and node.value.value.id == "wire"):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} alias "
                                 f"{ast.unparse(node)}")
    assert found == []
    assert all(f'"{name}"' in wire.read_text() for name in WIRE_NAMES)
