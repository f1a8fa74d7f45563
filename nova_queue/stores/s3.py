"""A result store in an S3 bucket (AWS, SeaweedFS, MinIO, ...) through boto3.

URL: ``s3://bucket/prefix?endpoint=http://host:port&region=us-east-1``. Without ``endpoint``
boto3's own configuration applies (``AWS_ENDPOINT_URL``, ``AWS_REGION``, profiles, ...).
Credentials never go in the URL: boto3 reads them (``AWS_ACCESS_KEY_ID`` and
``AWS_SECRET_ACCESS_KEY``, a profile, or an instance role).

Write-once puts use ``If-None-Match: *``; a server that answers that it does not implement
conditional writes makes the store fall back, for its lifetime, to head-then-put (which a
concurrent writer can race). User metadata values are percent-encoded so that any text
(prompts with emoji, CJK) survives HTTP headers.

boto3 is the ``s3`` extra and is imported only when a store is created.
"""

from __future__ import annotations

import logging
import re
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from nova_queue.errors import ConfigError, ObjectExistsError, ObjectNotFoundError, StoreError
from nova_queue.stores.base import (
    ObjectInfo,
    ResultStore,
    StoredObject,
    encode_metadata_value,
    normalize_metadata,
    validate_key,
)

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 3.0
READ_TIMEOUT_S = 10.0
#: Total tries per request in botocore's "standard" retry mode (first try included).
MAX_ATTEMPTS = 3
#: Tries of a write-once put that meets another conditional write in flight (AWS: 409).
CONFLICT_ATTEMPTS = 3

_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_QUERY_KEYS = ("endpoint", "region")
_SECRET_WORDS = ("secret", "key", "token", "password", "credential", "signature")
_NOT_FOUND = {"404", "NoSuchKey", "NotFound"}
_UNSUPPORTED_CONDITION = {"NotImplemented", "InvalidArgument"}
_BUCKET_TAKEN = {"BucketAlreadyOwnedByYou", "BucketAlreadyExists"}
_URL_USERINFO_RE = re.compile(r"(://)[^/\s@]+@")


def redact_url(url: str) -> str:
    """``url`` without user info and secret-looking query values (safe for logs and errors)."""
    try:
        parts = urllib.parse.urlsplit(url)
        pairs = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    except ValueError:
        return "<invalid url>"
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rpartition("@")[2]
    query = []
    for name, value in pairs:
        if any(word in name.lower() for word in _SECRET_WORDS):
            value = "***"
        elif "://" in value:
            value = redact_url(value)
        query.append((name, value))
    return urllib.parse.urlunsplit(parts._replace(
        netloc=netloc, query=urllib.parse.urlencode(query, safe=":/")))


@dataclass(frozen=True)
class S3Location:
    """What an ``s3://`` URL names."""

    bucket: str
    prefix: str
    endpoint: str
    region: str

    @property
    def url(self) -> str:
        """The canonical URL (it never holds credentials)."""
        query = {k: v for k, v in (("endpoint", self.endpoint), ("region", self.region)) if v}
        tail = "?" + urllib.parse.urlencode(query, safe=":/") if query else ""
        return f"s3://{self.bucket}/{self.prefix}{tail}"


def parse_s3_url(url: str) -> S3Location:
    """Parse ``s3://bucket/prefix?endpoint=...&region=...``; raise ConfigError if invalid."""
    shown = redact_url(url)
    try:
        parts = urllib.parse.urlsplit(url)
        query = urllib.parse.parse_qs(parts.query, keep_blank_values=True)
    except ValueError as exc:
        raise ConfigError(f"invalid S3 URL {shown!r}: {exc}") from None
    if parts.scheme.lower() != "s3":
        raise ConfigError(f"invalid S3 URL {shown!r}: expected s3://bucket/prefix")
    if "@" in parts.netloc:
        raise ConfigError(f"invalid S3 URL {shown!r}: credentials do not belong in the URL; "
                          "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or a profile)")
    bucket = parts.netloc
    if not _BUCKET_RE.match(bucket):
        raise ConfigError(f"invalid S3 URL {shown!r}: bucket names are 3-63 characters of "
                          "lower-case letters, digits, '.' and '-'")
    prefix = parts.path.strip("/")
    if prefix:
        try:
            validate_key(prefix)
        except StoreError:
            raise ConfigError(f"invalid S3 URL {shown!r}: bad prefix {prefix!r}") from None
    unknown = sorted(set(query) - set(_QUERY_KEYS))
    if unknown or any(len(v) > 1 for v in query.values()) or parts.fragment:
        raise ConfigError(f"invalid S3 URL {shown!r}: the only options are "
                          "?endpoint=http://host:port&region=name, each at most once")
    endpoint = query.get("endpoint", [""])[0]
    if endpoint:
        _check_endpoint(endpoint, f"S3 URL {shown!r}")
    return S3Location(bucket, prefix, endpoint.rstrip("/"), query.get("region", [""])[0])


def _check_endpoint(endpoint: str, where: str) -> None:
    ep = urllib.parse.urlsplit(endpoint)
    if ep.scheme not in ("http", "https") or not ep.hostname:
        raise ConfigError(f"invalid endpoint in {where}: expected http(s)://host[:port]")
    if "@" in ep.netloc:
        raise ConfigError(f"invalid endpoint in {where}: credentials do not belong in the URL")


def _import_boto3() -> Any:
    try:
        import boto3
    except ImportError:
        raise ConfigError("S3 result stores need boto3: pip install 'nova-queue[s3]'") from None
    return boto3


def _error_code(exc: Any) -> tuple[str, int]:
    response = getattr(exc, "response", None) or {}
    code = str(response.get("Error", {}).get("Code", ""))
    status = int(response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
    return code, status


def is_unsupported_condition(exc: Any) -> bool:
    """Whether a ClientError says the server does not implement conditional writes."""
    code, status = _error_code(exc)
    return code in _UNSUPPORTED_CONDITION or status == 501


def _is_precondition_failed(exc: Any) -> bool:
    code, status = _error_code(exc)
    return code == "PreconditionFailed" or status == 412


def _is_not_found(exc: Any) -> bool:
    code, status = _error_code(exc)
    return code in _NOT_FOUND or status == 404


class S3Store(ResultStore):
    """Objects under a prefix of one bucket, which is created if missing."""

    def __init__(self, url: str, *, public_endpoint: str = "",
                 conditional_writes: bool | None = None,
                 connect_timeout_s: float = CONNECT_TIMEOUT_S,
                 read_timeout_s: float = READ_TIMEOUT_S):
        """Open the store; ``conditional_writes=False`` skips If-None-Match (None: detect)."""
        loc = parse_s3_url(url)
        if public_endpoint:
            _check_endpoint(public_endpoint, "the public S3 endpoint")
        boto3 = _import_boto3()
        from botocore.config import Config
        from botocore.exceptions import BotoCoreError, ClientError

        self._client_error = ClientError
        self._errors = (ClientError, BotoCoreError)
        self.location = loc
        self.url = loc.url
        self.bucket = loc.bucket
        self._base = loc.prefix + "/" if loc.prefix else ""
        self._conditional = conditional_writes
        config = Config(connect_timeout=connect_timeout_s, read_timeout=read_timeout_s,
                        retries={"mode": "standard", "max_attempts": MAX_ATTEMPTS},
                        signature_version="s3v4")
        # Sessions are not thread-safe, clients are: build both clients here, once.
        session = boto3.session.Session()
        try:
            self._client = session.client("s3", endpoint_url=loc.endpoint or None,
                                          region_name=loc.region or None, config=config)
            self._public = session.client(
                "s3", endpoint_url=public_endpoint.rstrip("/"),
                region_name=self._client.meta.region_name, config=config,
            ) if public_endpoint else None
            creds = session.get_credentials()
            frozen = creds.get_frozen_credentials() if creds is not None else None
        except ValueError as exc:
            raise ConfigError(f"invalid S3 configuration for {self.url}: {exc}") from None
        except self._errors as exc:
            raise StoreError(self._scrub(f"cannot configure S3 for {self.url}: {exc}")) from exc
        self._secrets = tuple(s for s in (frozen.secret_key, frozen.token) if s) if frozen else ()
        self._ensure_bucket()

    def __repr__(self) -> str:
        return f"S3Store({self.url!r})"

    # -- contract --------------------------------------------------------------------------

    def put(self, key: str, data: bytes, content_type: str,
            metadata: Mapping[str, str] | None = None, *, overwrite: bool = False) -> None:
        """Store an object; unless ``overwrite``, raise ObjectExistsError if the key is taken."""
        full = self._full(key)
        meta = {k: encode_metadata_value(v) for k, v in normalize_metadata(metadata).items()}
        params = {"Bucket": self.bucket, "Key": full, "Body": bytes(data),
                  "ContentType": content_type, "Metadata": meta}
        if not overwrite and self._conditional is not False and self._put_if_absent(key, params):
            return
        if not overwrite and self.head(key) is not None:
            raise ObjectExistsError(f"object {key!r} already exists in {self.url}")
        try:
            self._client.put_object(**params)
        except self._errors as exc:
            raise self._error("put", key, exc) from exc

    def get(self, key: str) -> StoredObject:
        """The object, or ObjectNotFoundError."""
        try:
            resp = self._client.get_object(Bucket=self.bucket, Key=self._full(key))
            with resp["Body"] as body:
                data = body.read()
        except self._client_error as exc:
            if _is_not_found(exc):
                raise ObjectNotFoundError(f"no object {key!r} in {self.url}") from None
            raise self._error("get", key, exc) from exc
        except self._errors as exc:
            raise self._error("get", key, exc) from exc
        return StoredObject(key=key, data=data, content_type=resp.get("ContentType", ""),
                            metadata=_decode_metadata(resp.get("Metadata")))

    def head(self, key: str) -> ObjectInfo | None:
        """The object's attributes, or None if absent."""
        try:
            resp = self._client.head_object(Bucket=self.bucket, Key=self._full(key))
        except self._client_error as exc:
            if _is_not_found(exc):
                return None
            raise self._error("head", key, exc) from exc
        except self._errors as exc:
            raise self._error("head", key, exc) from exc
        return ObjectInfo(key=key, size=int(resp.get("ContentLength", 0)),
                          content_type=resp.get("ContentType", ""),
                          metadata=_decode_metadata(resp.get("Metadata")))

    def delete(self, key: str) -> None:
        """Remove the object; absent keys are not an error."""
        try:
            self._client.delete_object(Bucket=self.bucket, Key=self._full(key))
        except self._client_error as exc:
            if not _is_not_found(exc):
                raise self._error("delete", key, exc) from exc
        except self._errors as exc:
            raise self._error("delete", key, exc) from exc

    def list(self, prefix: str = "") -> Iterator[str]:
        """Keys under ``prefix`` (a plain string prefix), sorted."""
        if prefix:
            validate_key(prefix.rstrip("/"))
        keys: list[str] = []
        try:
            pages = self._client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=self._base + prefix)
            for page in pages:
                for item in page.get("Contents", ()):
                    key = item["Key"][len(self._base):]
                    if _is_valid_key(key):
                        keys.append(key)
        except self._errors as exc:
            raise self._error("list", prefix or "/", exc) from exc
        return iter(sorted(keys))

    def presign(self, key: str, expires_s: int = 3600) -> str | None:
        """A presigned GET URL on the public endpoint, or None when none is configured."""
        full = self._full(key)
        if self._public is None:
            return None
        try:
            return self._public.generate_presigned_url(
                "get_object", Params={"Bucket": self.bucket, "Key": full},
                ExpiresIn=int(expires_s))
        except self._errors as exc:
            raise self._error("presign", key, exc) from exc

    def close(self) -> None:
        """Release connections."""
        for client in (self._client, self._public):
            if client is not None:
                client.close()

    # -- helpers ---------------------------------------------------------------------------

    def _full(self, key: str) -> str:
        return self._base + validate_key(key)

    def _put_if_absent(self, key: str, params: dict[str, Any]) -> bool:
        """Conditional put; False when the server lacks conditional writes (remembered)."""
        for attempt in range(1, CONFLICT_ATTEMPTS + 1):
            try:
                self._client.put_object(**params, IfNoneMatch="*")
                self._conditional = True
                return True
            except self._client_error as exc:
                code, status = _error_code(exc)
                if _is_precondition_failed(exc):
                    raise ObjectExistsError(
                        f"object {key!r} already exists in {self.url}") from None
                if status == 409 and attempt < CONFLICT_ATTEMPTS:
                    time.sleep(0.05 * attempt)  # another conditional write was in flight
                    continue
                if status == 409:
                    raise ObjectExistsError(
                        f"object {key!r} is being written by someone else in {self.url}"
                    ) from None
                if self._conditional is None and is_unsupported_condition(exc):
                    log.warning("S3 server at %s rejected a conditional put (%s); falling back "
                                "to head-then-put, which concurrent writers can race",
                                self.url, code or status)
                    self._conditional = False
                    return False
                raise self._error("put", key, exc) from exc
            except self._errors as exc:
                raise self._error("put", key, exc) from exc
        return False  # pragma: no cover - the loop always returns or raises

    def _ensure_bucket(self) -> None:
        try:
            self._client.head_bucket(Bucket=self.bucket)
            return
        except self._client_error as exc:
            if not _is_not_found(exc) and _error_code(exc)[0] != "NoSuchBucket":
                raise self._error("open bucket", "", exc) from exc
        except self._errors as exc:
            raise self._error("open bucket", "", exc) from exc
        params: dict[str, Any] = {"Bucket": self.bucket}
        region = self._client.meta.region_name
        if region and region not in ("us-east-1", "aws-global"):
            params["CreateBucketConfiguration"] = {"LocationConstraint": region}
        try:
            self._client.create_bucket(**params)
            log.info("created bucket %s", self.bucket)
        except self._client_error as exc:
            if _error_code(exc)[0] not in _BUCKET_TAKEN:  # a racing creator won: fine
                raise self._error("create bucket", "", exc) from exc
        except self._errors as exc:
            raise self._error("create bucket", "", exc) from exc

    def _error(self, op: str, key: str, exc: BaseException) -> StoreError:
        code, status = _error_code(exc)
        if code or status:
            message = getattr(exc, "response", {}).get("Error", {}).get("Message", "")
            detail = f"{code or status}: {message}" if message else f"{code or status}"
        else:
            detail = f"{type(exc).__name__}: {exc}"
        target = f"{key!r} in {self.url}" if key else self.url
        return StoreError(self._scrub(f"S3 {op} of {target} failed: {detail}"))

    def _scrub(self, text: str) -> str:
        text = _URL_USERINFO_RE.sub(r"\1***@", text)
        for secret in getattr(self, "_secrets", ()):
            text = text.replace(secret, "***")
        return text


def _is_valid_key(key: str) -> bool:
    try:
        validate_key(key)
    except StoreError:
        return False
    return True


def _decode_metadata(raw: Mapping[str, str] | None) -> dict[str, str]:
    return {k.lower(): urllib.parse.unquote(v) for k, v in (raw or {}).items()}
