"""Stable node identity, persisted in ``<home>/.nova/node.json`` and reused across restarts.

A *node* is one nova home: every worker started with the same home shares its ``node_id``.
A worker's *identity* is its node and name (:func:`node_identity`); each process gets a new
worker id ``<identity>.<12 hex>`` (:func:`new_worker_id`), and the pool keeps a worker's
blame (quarantine, failure streak, the tasks it failed) by identity, so a restart clears none
of it.
A *host* is the physical (or virtual) machine: ``host_id`` is derived from
``/etc/machine-id`` (hashed, as systemd recommends, so the raw id never leaves the host), or
failing that from the hostname and MAC address. Several homes on one machine thus show as
one host. Containers without ``/etc/machine-id`` get their own host id unless the host's file
is mounted read-only into them.

``node.json``::

    {"node_id": "<uuid4 hex>", "name": "<hostname>-<4 hex>", "host_id": "<16 hex>",
     "created": "<ISO 8601 UTC>"}

The file is written atomically (temp file + ``os.replace``), created under an exclusive lock
on ``.nova/node.lock`` so that workers starting together in one home agree on one node id,
and rewritten (with a warning) when it is corrupt. ``host_id`` is always recomputed at load;
the stored one records where the node was created. A ``name`` passed to
:func:`load_or_create_node` names the node for this run only and is not persisted: several
workers may share a home under different ``--name`` values; edit ``name`` in ``node.json``
to rename the node for good.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import hashlib
import json
import logging
import os
import secrets
import socket
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from nova_queue.errors import ConfigError

try:  # POSIX
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]
    import msvcrt

log = logging.getLogger(__name__)

NODE_FILE = "node.json"
LOCK_FILE = "node.lock"
LOCK_TIMEOUT_S = 30.0
_MACHINE_ID_FILES = ("/etc/machine-id", "/var/lib/dbus/machine-id")
_MAX_NAME = 64


@dataclasses.dataclass(frozen=True)
class Node:
    """This home's identity, as a worker reports it."""

    node_id: str
    name: str
    host_id: str
    created: str
    path: Path  # the node.json it came from


def load_or_create_node(home: Path | str, name: str | None = None) -> Node:
    """The node in ``<home>/.nova/node.json``, created on first use; ``name`` is for this run."""
    folder = Path(home) / ".nova"
    path = folder / NODE_FILE
    host_id = current_host_id()
    override = _check_name(name) if name is not None else None
    data = _read(path, warn=False)
    if data is None:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot create {folder}: {exc}") from exc
        with _locked(folder / LOCK_FILE):
            data = _read(path, warn=True)  # another worker may have created it meanwhile
            if data is None:
                data = _new_record(host_id)
                _write_atomic(path, data)
                log.info("created node %s (%s) in %s", data["node_id"], data["name"], path)
    if data["host_id"] and data["host_id"] != host_id:
        log.warning("%s was created on another host (host id %s, this host %s); a copied "
                    "home shares its node id", path, data["host_id"], host_id)
    return Node(node_id=data["node_id"], name=override or data["name"], host_id=host_id,
                created=data["created"], path=path)


def node_identity(node: Node) -> str:
    """This worker's identity, which its blame follows across restarts (a quarantine, a
    failure streak, the tasks it failed: ``nova_queue.keys.ident_of``): the node id's first 8
    hex digits and 8 of a hash of the node id and the worker's name, so that several
    workers sharing a home under different ``--name`` values are told apart."""
    digest = hashlib.sha256(f"{node.node_id}\0{node.name}".encode()).hexdigest()
    return f"{node.node_id[:8]}-{digest[:8]}"


def new_worker_id(node: Node) -> str:
    """A worker id unique per process: ``<identity>.<12 random hex digits>``."""
    return f"{node_identity(node)}.{secrets.token_hex(6)}"


def current_host_id() -> str:
    """16 hex digits identifying this machine: hashed machine-id, else hostname + MAC."""
    for candidate in _MACHINE_ID_FILES:
        try:
            machine_id = Path(candidate).read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError):
            continue
        if machine_id:
            return hashlib.sha256(f"nova-queue:{machine_id}".encode()).hexdigest()[:16]
    mac = uuid.getnode()
    # uuid.getnode() falls back to a random number (multicast bit set) when no MAC is found;
    # a random one would differ per process, so use the hostname alone then.
    mac_part = "" if (mac >> 40) & 1 else f"{mac:012x}"
    return hashlib.sha256(f"nova-queue:{socket.gethostname()}:{mac_part}".encode()).hexdigest()[:16]


def _check_name(name: str) -> str:
    cleaned = name.strip()
    if not cleaned or len(cleaned) > _MAX_NAME or not cleaned.isprintable():
        raise ConfigError(f"invalid node name {name!r}: 1-{_MAX_NAME} printable characters")
    return cleaned


def _default_name(node_id: str) -> str:
    host = socket.gethostname().split(".")[0] or "node"
    host = "".join(c if c.isalnum() or c in "-_" else "-" for c in host)[: _MAX_NAME - 5]
    return f"{host}-{node_id[:4]}"


def _new_record(host_id: str) -> dict[str, str]:
    node_id = uuid.uuid4().hex
    created = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return {"node_id": node_id, "name": _default_name(node_id), "host_id": host_id,
            "created": created}


def _read(path: Path, *, warn: bool) -> dict[str, str] | None:
    """The stored record, or None when missing or (logged if ``warn``) corrupt.

    Only a bad ``node_id`` makes the file corrupt; a bad ``name``, ``host_id`` or ``created``
    (say, a hand edit gone wrong) falls back to a default so the node keeps its id.
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc
    try:
        data = json.loads(raw.decode("utf-8"))
        node_id = data["node_id"]
        valid = (isinstance(node_id, str) and len(node_id) == 32
                 and all(c in "0123456789abcdef" for c in node_id))
    except (ValueError, TypeError, KeyError):
        valid = False
    if not valid:
        if warn:
            log.warning("%s is corrupt; replacing it with a new node identity", path)
        return None
    record = {k: data.get(k) for k in ("name", "host_id", "created")}
    try:
        record["name"] = _check_name(record["name"]) if isinstance(record["name"], str) else None
    except ConfigError:
        record["name"] = None
    if record["name"] is None:
        log.warning("%s has an invalid name %r; using a default", path, data.get("name"))
        record["name"] = _default_name(node_id)
    for key in ("host_id", "created"):
        if not isinstance(record[key], str):
            record[key] = ""
    return {"node_id": node_id, **record}  # type: ignore[dict-item]


def _write_atomic(path: Path, data: dict[str, str]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".node-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def _locked(lock_path: Path, timeout_s: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold an exclusive lock on ``lock_path`` (released by the OS if the process dies)."""
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            try:
                if fcntl is not None:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                else:
                    msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
                break
            except OSError:
                if time.monotonic() >= deadline:
                    raise ConfigError(f"could not lock {lock_path} within {timeout_s:g} s; "
                                      "is another process stuck holding it?") from None
                time.sleep(0.01)  # back-off between lock attempts, not synchronisation
        yield
    finally:
        if fcntl is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
        else:
            with contextlib.suppress(OSError):
                os.lseek(fd, 0, os.SEEK_SET)
                msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
        os.close(fd)
