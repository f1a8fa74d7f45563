"""The result-store contract: write-once objects with content type and metadata."""

from __future__ import annotations

import abc
import dataclasses
import re
import urllib.parse
from collections.abc import Iterator, Mapping

from nova_queue.errors import StoreError

# Keys are relative POSIX paths of safe characters: no "..", no absolute paths, no
# backslashes, so a key can never escape the store's root (file store) or prefix (S3).
_KEY_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)*$")


def validate_key(key: str) -> str:
    """Return ``key`` if it is a safe relative object key, else raise StoreError."""
    if not isinstance(key, str) or len(key) > 512 or not _KEY_RE.match(key) or ".." in key:
        raise StoreError(f"invalid object key {key!r}")
    return key


#: Metadata must fit S3's limit on user metadata (keys plus encoded values), on every store.
MAX_METADATA_BYTES = 2048
_META_KEY_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
# Printable ASCII except space and "%": spaces at the ends of HTTP header values are dropped
# and "%" must be encoded for decoding to be exact.
_HEADER_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) != "%")


def encode_metadata_value(value: str) -> str:
    """Percent-encode ``value`` so that it travels intact in an HTTP header."""
    return urllib.parse.quote(value, safe=_HEADER_SAFE)


def fit_metadata_value(value: str, limit: int) -> str:
    """``value`` shortened (from the end) until it is at most ``limit`` bytes encoded."""
    while value and len(encode_metadata_value(value)) > limit:
        value = value[: max(len(value) * 3 // 4, len(value) - 64)]
    return value


def normalize_metadata(metadata: Mapping[str, str] | None) -> dict[str, str]:
    """Metadata with lower-cased keys; raise StoreError for bad keys, values or size."""
    result: dict[str, str] = {}
    size = 0
    for key, value in (metadata or {}).items():
        name = key.lower() if isinstance(key, str) else key
        if not isinstance(name, str) or not _META_KEY_RE.match(name):
            raise StoreError(f"invalid metadata key {key!r}: use letters, digits and '-'")
        if not isinstance(value, str):
            raise StoreError(f"metadata value for {name!r} must be a str, not "
                             f"{type(value).__name__}")
        if name in result:
            raise StoreError(f"duplicate metadata key {name!r} (keys are case-insensitive)")
        result[name] = value
        size += len(name) + len(encode_metadata_value(value))
    if size > MAX_METADATA_BYTES:
        raise StoreError(f"metadata is {size} bytes encoded; the limit is {MAX_METADATA_BYTES}")
    return result


@dataclasses.dataclass(frozen=True)
class StoredObject:
    """An object's bytes and what was stored with them."""

    key: str
    data: bytes
    content_type: str
    metadata: Mapping[str, str]


@dataclasses.dataclass(frozen=True)
class ObjectInfo:
    """An object's attributes without its bytes."""

    key: str
    size: int
    content_type: str
    metadata: Mapping[str, str]


class ResultStore(abc.ABC):
    """Where results and job artifacts live. Implementations must be thread-safe."""

    url: str

    @abc.abstractmethod
    def put(self, key: str, data: bytes, content_type: str,
            metadata: Mapping[str, str] | None = None, *, overwrite: bool = False) -> None:
        """Store an object; unless ``overwrite``, raise ObjectExistsError if the key is taken.

        Metadata keys are case-insensitive (stored lower-case); see :func:`normalize_metadata`.
        """

    @abc.abstractmethod
    def get(self, key: str) -> StoredObject:
        """The object, or ObjectNotFoundError."""

    @abc.abstractmethod
    def head(self, key: str) -> ObjectInfo | None:
        """The object's attributes, or None if absent."""

    def exists(self, key: str) -> bool:
        """Whether an object is stored under ``key``."""
        return self.head(key) is not None

    @abc.abstractmethod
    def delete(self, key: str) -> None:
        """Remove the object; absent keys are not an error."""

    @abc.abstractmethod
    def list(self, prefix: str = "") -> Iterator[str]:
        """Keys under ``prefix``, sorted."""

    def presign(self, key: str, expires_s: int = 3600) -> str | None:
        """A URL a browser can fetch directly, or None when the store has none."""
        return None

    def close(self) -> None:
        """Release connections."""
