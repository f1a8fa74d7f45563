"""A result store in a local folder: atomic write-once files with JSON sidecars.

Layout under the root: an object ``a/b.png`` is the file ``a/b.png``; its content type and
metadata are in ``a/.b.png.meta.json``. Temporary files are ``a/.b.png.<random>.tmp``. Keys
never start with ".", so every dot-file is internal and :meth:`FileStore.list` hides it.

A put writes the bytes and the sidecar to temporary files (fsynced), then, holding the
store's lock, moves the sidecar into place and hard-links the data file to its final name.
The link is the commit point: it fails if the name is taken, so a write-once key can never
be overwritten, and the object never appears without its sidecar. The lock (a thread lock
plus ``flock`` on ``<root>/.lock``, so several processes may share a folder) keeps a losing
writer from replacing the winner's sidecar.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import tempfile
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from nova_queue.errors import ConfigError, ObjectExistsError, ObjectNotFoundError, StoreError
from nova_queue.stores.base import (
    ObjectInfo,
    ResultStore,
    StoredObject,
    normalize_metadata,
    validate_key,
)

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: the thread lock alone
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

DEFAULT_CONTENT_TYPE = "application/octet-stream"
_LOCK_NAME = ".lock"


class FileStore(ResultStore):
    """Objects as files under an absolute folder (created if missing)."""

    def __init__(self, root: str | os.PathLike[str]):
        path = Path(root)
        if not path.is_absolute():
            raise ConfigError(f"file store root must be an absolute path, not {str(root)!r}")
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot create file store root {str(path)!r}: {exc}") from exc
        self.root = path.resolve()
        self.url = self.root.as_uri()
        self._thread_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"FileStore({str(self.root)!r})"

    # -- paths -----------------------------------------------------------------------------

    def _path(self, key: str) -> Path:
        validate_key(key)
        path = self.root.joinpath(*key.split("/"))
        # validate_key rules out "..", but a symlink inside the root could still lead out.
        real = os.path.realpath(path)
        if not real.startswith(str(self.root) + os.sep):
            raise StoreError(f"object key {key!r} resolves outside the store root")
        return path

    @staticmethod
    def _sidecar(path: Path) -> Path:
        return path.with_name(f".{path.name}.meta.json")

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with self._thread_lock:
            if fcntl is None:
                yield
                return
            fd = os.open(self.root / _LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)  # releases the flock

    # -- contract --------------------------------------------------------------------------

    def put(self, key: str, data: bytes, content_type: str,
            metadata: Mapping[str, str] | None = None, *, overwrite: bool = False) -> None:
        """Store an object; unless ``overwrite``, raise ObjectExistsError if the key is taken."""
        path = self._path(key)
        meta = normalize_metadata(metadata)
        if os.path.isdir(path):
            raise StoreError(f"key {key!r} is a folder of other keys in {self.url}")
        if not overwrite and os.path.lexists(path):
            raise ObjectExistsError(f"object {key!r} already exists in {self.url}")
        sidecar = json.dumps({"content_type": content_type, "metadata": meta},
                             ensure_ascii=False, sort_keys=True).encode("utf-8")
        temps: list[str] = []
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            data_tmp = _write_temp(path, bytes(data))
            temps.append(data_tmp)
            side_tmp = _write_temp(path, sidecar)
            temps.append(side_tmp)
            with self._locked():
                if not overwrite and os.path.lexists(path):
                    raise ObjectExistsError(f"object {key!r} already exists in {self.url}")
                os.replace(side_tmp, self._sidecar(path))
                if overwrite:
                    os.replace(data_tmp, path)
                else:
                    try:
                        os.link(data_tmp, path)
                    except FileExistsError:
                        raise ObjectExistsError(
                            f"object {key!r} already exists in {self.url}") from None
            _fsync_dir(path.parent)
        except OSError as exc:
            raise StoreError(f"cannot write {key!r} in {self.url}: {exc}") from exc
        finally:
            for tmp in temps:
                _unlink_quietly(tmp)

    def get(self, key: str) -> StoredObject:
        """The object, or ObjectNotFoundError."""
        path = self._path(key)
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise ObjectNotFoundError(f"no object {key!r} in {self.url}") from None
        except OSError as exc:
            raise StoreError(f"cannot read {key!r} in {self.url}: {exc}") from exc
        content_type, meta = self._read_sidecar(path)
        return StoredObject(key=key, data=data, content_type=content_type, metadata=meta)

    def head(self, key: str) -> ObjectInfo | None:
        """The object's attributes, or None if absent."""
        path = self._path(key)
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise StoreError(f"cannot stat {key!r} in {self.url}: {exc}") from exc
        if not os.path.isfile(path):
            return None
        content_type, meta = self._read_sidecar(path)
        return ObjectInfo(key=key, size=st.st_size, content_type=content_type, metadata=meta)

    def delete(self, key: str) -> None:
        """Remove the object; absent keys are not an error."""
        path = self._path(key)
        try:
            with self._locked():
                if os.path.isdir(path):
                    return  # a "folder" of other keys, not an object
                _unlink_quietly(path)
                _unlink_quietly(self._sidecar(path))
        except OSError as exc:
            raise StoreError(f"cannot delete {key!r} in {self.url}: {exc}") from exc

    def list(self, prefix: str = "") -> Iterator[str]:
        """Keys under ``prefix`` (a plain string prefix, as in S3), sorted."""
        if prefix:
            validate_key(prefix.rstrip("/"))
        folder = prefix.rpartition("/")[0]
        start = self.root.joinpath(*folder.split("/")) if folder else self.root
        keys: list[str] = []
        for dirpath, dirnames, filenames in os.walk(start, onerror=_raise_walk_error):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            rel = os.path.relpath(dirpath, self.root).replace(os.sep, "/")
            base = "" if rel == "." else rel + "/"
            for name in filenames:
                key = base + name
                if name.startswith(".") or not key.startswith(prefix):
                    continue
                try:
                    validate_key(key)
                except StoreError:
                    continue  # a foreign file that no key can name
                keys.append(key)
        return iter(sorted(keys))

    def presign(self, key: str, expires_s: int = 3600) -> str | None:
        """None: files are served through the web app."""
        validate_key(key)
        return None

    # -- helpers ---------------------------------------------------------------------------

    def _read_sidecar(self, path: Path) -> tuple[str, dict[str, str]]:
        try:
            raw = json.loads(self._sidecar(path).read_bytes())
        except FileNotFoundError:
            # Written by hand or by an older version: still readable, without attributes.
            return DEFAULT_CONTENT_TYPE, {}
        except (OSError, ValueError) as exc:
            raise StoreError(f"cannot read the metadata of {str(path)!r}: {exc}") from exc
        return raw.get("content_type") or DEFAULT_CONTENT_TYPE, dict(raw.get("metadata") or {})


def _write_temp(final: Path, data: bytes) -> str:
    """Write ``data`` to a fsynced temporary file next to ``final``; return its path."""
    fd, tmp = tempfile.mkstemp(dir=final.parent, prefix=f".{final.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        _unlink_quietly(tmp)
        raise
    return tmp


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return  # not supported here (e.g. Windows); the data itself is fsynced
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.EBADF):
            raise
    finally:
        os.close(fd)


def _unlink_quietly(path: str | Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _raise_walk_error(exc: OSError) -> None:
    if isinstance(exc, (FileNotFoundError, NotADirectoryError)):
        return  # nothing stored under that prefix
    raise StoreError(f"cannot list the file store: {exc}") from exc
