"""Node identity: persisted, reused, repaired when corrupt, agreed on by concurrent starters."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from nova_queue.errors import ConfigError
from nova_queue.keys import WORKER_ID_RE, ident_of
from nova_queue.workers.node import (
    current_host_id,
    load_or_create_node,
    new_worker_id,
    node_identity,
)


def test_created_then_reused(tmp_path):
    first = load_or_create_node(tmp_path)
    stored = json.loads((tmp_path / ".nova" / "node.json").read_text())
    assert stored["node_id"] == first.node_id and len(first.node_id) == 32
    assert set(stored) == {"node_id", "name", "host_id", "created"}
    assert first.name == stored["name"] and first.name.endswith("-" + first.node_id[:4])
    assert first.host_id == stored["host_id"] == current_host_id()
    again = load_or_create_node(tmp_path)
    assert again == first


def test_nested_home_is_created(tmp_path):
    node = load_or_create_node(tmp_path / "a" / "b")
    assert node.path == tmp_path / "a" / "b" / ".nova" / "node.json" and node.path.is_file()


def test_name_override_is_for_this_run_only(tmp_path):
    default = load_or_create_node(tmp_path)
    named = load_or_create_node(tmp_path, name="  gpu box 1 ")
    assert named.name == "gpu box 1" and named.node_id == default.node_id
    assert load_or_create_node(tmp_path).name == default.name


@pytest.mark.parametrize("bad", ["", "   ", "x" * 65, "tab\tname", "new\nline"])
def test_invalid_name_rejected(tmp_path, bad):
    with pytest.raises(ConfigError, match="invalid node name"):
        load_or_create_node(tmp_path, name=bad)


@pytest.mark.parametrize("content", [b"", b"{not json", b"[]", b'{"node_id": 5}',
                                     b'{"node_id": "xyz"}', b"\xff\xfe"])
def test_corrupt_file_is_rewritten_with_a_warning(tmp_path, caplog, content):
    path = tmp_path / ".nova" / "node.json"
    path.parent.mkdir()
    path.write_bytes(content)
    with caplog.at_level(logging.WARNING, logger="nova_queue.workers.node"):
        node = load_or_create_node(tmp_path)
    assert "corrupt" in caplog.text
    assert json.loads(path.read_text())["node_id"] == node.node_id
    assert load_or_create_node(tmp_path).node_id == node.node_id


def test_bad_name_in_file_keeps_the_node_id(tmp_path, caplog):
    node = load_or_create_node(tmp_path)
    data = json.loads(node.path.read_text())
    data["name"] = "\x00bad"
    del data["created"]
    node.path.write_text(json.dumps(data))
    with caplog.at_level(logging.WARNING, logger="nova_queue.workers.node"):
        again = load_or_create_node(tmp_path)
    assert again.node_id == node.node_id and again.name == node.name
    assert "invalid name" in caplog.text


def test_host_id_shared_between_homes_on_one_host(tmp_path):
    a, b = load_or_create_node(tmp_path / "a"), load_or_create_node(tmp_path / "b")
    assert a.node_id != b.node_id
    assert a.host_id == b.host_id and len(a.host_id) == 16


def test_no_temp_files_left_behind(tmp_path):
    load_or_create_node(tmp_path)
    names = sorted(p.name for p in (tmp_path / ".nova").iterdir())
    assert names == ["node.json", "node.lock"]


def test_concurrent_threads_agree(tmp_path):
    barrier = threading.Barrier(8)
    ids: list[str] = []

    def start() -> None:
        barrier.wait(timeout=10)
        ids.append(load_or_create_node(tmp_path).node_id)

    threads = [threading.Thread(target=start) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    assert len(ids) == 8 and len(set(ids)) == 1


_STARTER = """
import os, sys, time
from pathlib import Path
from nova_queue.workers.node import load_or_create_node
home, ready, go = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
(ready / str(os.getpid())).touch()  # imported; now wait at the start line
deadline = time.monotonic() + 20
while not go.exists():
    if time.monotonic() > deadline:
        sys.exit("start signal never came")
    time.sleep(0.001)
print(load_or_create_node(home).node_id)
"""


@pytest.mark.parametrize("corrupt_first", [False, True])
def test_concurrent_processes_agree(tmp_path, corrupt_first):
    home, ready, go = tmp_path / "home", tmp_path / "ready", tmp_path / "go"
    ready.mkdir()
    if corrupt_first:
        (home / ".nova").mkdir(parents=True)
        (home / ".nova" / "node.json").write_text("{truncated")
    procs = [
        subprocess.Popen([sys.executable, "-c", _STARTER, str(home), str(ready), str(go)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    try:
        deadline = time.monotonic() + 30
        while len(list(ready.iterdir())) < len(procs):
            assert time.monotonic() < deadline, "starters did not get ready in time"
            assert all(p.poll() is None for p in procs), "a starter died before the start"
            time.sleep(0.01)
        go.touch()
        outs = [p.communicate(timeout=30) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert all(p.returncode == 0 for p in procs), [err for _, err in outs]
    ids = {out.strip() for out, _ in outs}
    assert len(ids) == 1
    assert json.loads((home / ".nova" / "node.json").read_text())["node_id"] in ids


def test_worker_ids_unique_and_prefixed_by_the_identity(tmp_path):
    node = load_or_create_node(tmp_path)
    ids = {new_worker_id(node) for _ in range(2000)}
    assert len(ids) == 2000
    assert {ident_of(i) for i in ids} == {node_identity(node)}
    assert node_identity(node).startswith(node.node_id[:8] + "-")
    assert all(set(i) <= set("0123456789abcdef-.") and WORKER_ID_RE.match(i) for i in ids)


def test_the_identity_is_the_node_and_the_name(tmp_path):
    """Two workers sharing a home under different names are two identities; a restart under
    the same name is the same one."""
    a, b = load_or_create_node(tmp_path, "gpu0"), load_or_create_node(tmp_path, "gpu1")
    assert a.node_id == b.node_id
    assert node_identity(a) != node_identity(b)
    assert node_identity(load_or_create_node(tmp_path, "gpu0")) == node_identity(a)


def test_worker_ids_differ_across_processes(tmp_path):
    load_or_create_node(tmp_path)
    code = ("import sys; from pathlib import Path; from nova_queue.workers.node import *; "
            "print(new_worker_id(load_or_create_node(Path(sys.argv[1]))))")
    outs = [subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                           text=True, timeout=30, check=True).stdout.strip() for _ in range(3)]
    assert len(set(outs)) == 3 and len({ident_of(o) for o in outs}) == 1


def test_unwritable_home_is_a_config_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(ConfigError, match="cannot (create|read)"):
        load_or_create_node(Path(blocker))
