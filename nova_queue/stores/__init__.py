"""Result stores: :func:`open_store` by URL, and the key layout shared by workers and web.

Key layout (every key passes :func:`validate_key`)::

    jobs/<job>/results/<index:05d>-g<lease_gen>-<attempt_id>.<ext>   one task's result
    jobs/<job>/<name>                          manifest.json, contact-sheet.png, <job>.zip

A result key names the lease that produced it, so it is written once and a stale worker's
late upload can never replace the result of a newer lease. A task's ``result`` field is
writable by any worker credential, so every reader (``nova-queue results``, the gallery,
the post-worker) uses it only if it is that task's own key (:func:`own_result_ext`).
"""

from __future__ import annotations

import dataclasses
import re
import urllib.parse
from typing import TYPE_CHECKING

from nova_queue import keys
from nova_queue.errors import ConfigError, StoreError
from nova_queue.stores.base import ObjectInfo, ResultStore, StoredObject, validate_key
from nova_queue.stores.file import FileStore
from nova_queue.stores.s3 import S3Store, redact_url

if TYPE_CHECKING:
    from nova_queue.models import TaskInfo

__all__ = [
    "MANIFEST_NAME",
    "SHEET_NAME",
    "ArtifactKeys",
    "FileStore",
    "ObjectInfo",
    "ResultStore",
    "S3Store",
    "StoredObject",
    "artifact_key",
    "artifact_names",
    "open_store",
    "own_result_ext",
    "result_key",
    "validate_key",
]


def open_store(url: str, *, public_endpoint: str = "") -> ResultStore:
    """The store for ``file:///abs/path`` or ``s3://bucket/prefix?endpoint=...&region=...``."""
    shown = redact_url(url) if isinstance(url, str) else repr(url)
    try:
        parts = urllib.parse.urlsplit(url)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"invalid result store URL {shown!r}: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme == "file":
        if parts.netloc not in ("", "localhost") or parts.query or parts.fragment:
            raise ConfigError(f"invalid result store URL {shown!r}: "
                              "use file:///absolute/path (three slashes, no options)")
        path = urllib.parse.unquote(parts.path)
        if not path.startswith("/"):
            raise ConfigError(f"invalid result store URL {shown!r}: the path must be absolute")
        return FileStore(path)
    if scheme == "s3":
        return S3Store(url, public_endpoint=public_endpoint)
    raise ConfigError(f"unsupported result store URL {shown!r}: "
                      "use file:///absolute/path or s3://bucket/prefix")


def result_key(job_id: str, index: int, lease_gen: int, attempt_id: str, ext: str) -> str:
    """Write-once key of one task result, unique per lease (the format is
    :func:`nova_queue.keys.result_key`; ``complete`` accepts no other)."""
    for name, value in (("task index", index), ("lease_gen", lease_gen)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise StoreError(f"{name} must be a non-negative int, not {value!r}")
    ext = ext.lstrip(".") if isinstance(ext, str) else ext
    _check_segments(job_id=job_id, attempt_id=attempt_id, ext=ext)
    return validate_key(keys.result_key(job_id, index, lease_gen, attempt_id, ext))


#: A result's file extension (the store's format allows no other).
_EXT_RE = re.compile(r"[A-Za-z0-9]{1,16}")


def own_result_ext(task: TaskInfo) -> str | None:
    """The extension of ``task``'s result if its key is the one the task's own lease writes
    (its job, index, ``lease_gen`` and ``attempt_id``), else None: a ``result`` pointing
    into another job, task or lease."""
    name = task.result.rsplit("/", 1)[-1]
    ext = name.rsplit(".", 1)[-1] if "." in name else ""
    if not _EXT_RE.fullmatch(ext):
        return None
    try:
        expected = result_key(task.job_id, task.index, task.lease_gen, task.attempt_id, ext)
    except StoreError:  # no attempt id, or one that cannot be part of a key
        return None
    return ext if expected == task.result else None


def artifact_key(job_id: str, name: str) -> str:
    """Key of a job-level artifact such as ``manifest.json`` or ``<job>.zip``."""
    _check_segments(job_id=job_id, name=name)
    return validate_key(f"jobs/{job_id}/{name}")


MANIFEST_NAME = "manifest.json"
SHEET_NAME = "contact-sheet.png"


def artifact_names(job_id: str) -> tuple[str, ...]:
    """File names of a job's artifacts (manifest, contact sheet, zip), in that order."""
    return (MANIFEST_NAME, SHEET_NAME, f"{job_id}.zip")


@dataclasses.dataclass(frozen=True)
class ArtifactKeys:
    """Where one job's artifacts live in the store."""

    manifest: str
    contact_sheet: str
    zip: str

    @classmethod
    def for_job(cls, job_id: str) -> ArtifactKeys:
        """The keys of ``job_id``'s artifacts (``jobs/<job>/<name>``)."""
        manifest, sheet, zip_name = artifact_names(job_id)
        return cls(manifest=artifact_key(job_id, manifest),
                   contact_sheet=artifact_key(job_id, sheet), zip=artifact_key(job_id, zip_name))

    def to_json(self) -> dict[str, str]:
        """The keys by artifact: ``manifest``, ``contact_sheet``, ``zip``."""
        return dataclasses.asdict(self)


def _check_segments(**parts: str) -> None:
    # Each part must stay one path segment, or a job id "a/b" would nest under job "a".
    for label, value in parts.items():
        if not isinstance(value, str) or not value or "/" in value:
            raise StoreError(f"invalid {label} {value!r} for an object key")
