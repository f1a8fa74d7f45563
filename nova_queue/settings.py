"""One frozen settings object, read from ``NOVA_*`` environment variables.

Every default is defined here and nowhere else; the CLI's options read the
same environment variables and the web app reads this object. The table of
docs/CONFIGURATION.md mirrors :class:`Settings`'s fields (tests/project/test_docs.py).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path

from nova_queue.errors import ConfigError
from nova_queue.keys import check_namespace
from nova_queue.limits import DEFAULT_RETENTION_S, MAX_INLINE_BYTES, MAX_RETENTION_S

DEFAULT_REDIS_URL = "redis://localhost:6379/0"
#: Largest prompts input ``enqueue`` reads by default (64 MiB).
DEFAULT_MAX_PROMPT_BYTES = 64 * 1024 * 1024


#: What a worker may ask to be at registration (NOVA_TRUST, a token's --trust).
TRUST_LEVELS = ("trusted", "new")


@dataclasses.dataclass(frozen=True)
class Settings:
    """Runtime configuration shared by the library, the CLI, workers and the web app."""

    #: Redis URL; ``redis://``, ``rediss://`` (TLS) and ``unix://``, credentials included.
    #: Env ``NOVA_REDIS_URL``, falling back to ``REDIS_URL``.
    redis_url: str = DEFAULT_REDIS_URL
    #: Namespace: every key is ``nova:{<namespace>}:...``; 1 to 64 of ``A-Z a-z 0-9 _ . -``
    #: (:data:`~nova_queue.keys.NAMESPACE_RE`). Env ``NOVA_NAMESPACE``.
    namespace: str = "default"
    #: Result store URL: ``file:///abs/path`` or ``s3://bucket/prefix``. Env ``NOVA_STORE_URL``.
    #: Empty means ``file://<home>/.nova/results``.
    store_url: str = ""
    #: Results of at most this many bytes are held in Redis (written by the commit, deleted
    #: with their task) instead of the store: a small task then costs no store round trip.
    #: The default keeps return values (text, JSON) in Redis and files (images) in the
    #: store. 0: every result goes to the store. 0..65536. Env ``NOVA_INLINE_RESULT_BYTES``.
    inline_result_bytes: int = 1024
    #: A direct worker's trust: ``trusted`` (the operator vouches for the machine: its
    #: results are never re-run to check them) or ``new`` (its results are verified by
    #: re-running a share of them elsewhere until it earns trust; docs/SECURITY.md). Gateway
    #: workers take their token's (``tokens create --trust``). Env ``NOVA_TRUST``.
    trust: str = "trusted"
    #: Folder for ``.nova/node.json`` and the default file store. Env ``NOVA_HOME``.
    home: str = "."
    #: How often a worker renews its heartbeat and leases. Env ``NOVA_HEARTBEAT_INTERVAL_S``.
    heartbeat_interval_s: float = 2.0
    #: Lease and heartbeat time to live, at least 4 x the interval. Env ``NOVA_LEASE_TTL_S``.
    lease_ttl_s: float = 10.0
    #: Attempts per task before it is marked failed. Env ``NOVA_MAX_ATTEMPTS``.
    max_attempts: int = 3
    #: Weight of the newest warm run in a worker's moving average. Env ``NOVA_EMA_ALPHA``.
    ema_alpha: float = 0.3
    #: A task's run-time limit when its job sets none (``enqueue --timeout``): the larger of
    #: this floor and ``task_timeout_factor`` x the claiming worker's predicted time. Past it
    #: the lease is not renewed and the task returns to the queue (an attempt is used).
    #: Env ``NOVA_TASK_TIMEOUT_FLOOR_S``.
    task_timeout_floor_s: float = 120.0
    #: Env ``NOVA_TASK_TIMEOUT_FACTOR``.
    task_timeout_factor: float = 10.0
    #: A worker is quarantined (its claims refused) once this many tasks it failed in a row
    #: succeed on other workers. Env ``NOVA_QUARANTINE_AFTER``.
    quarantine_after: int = 3
    #: ... or once it fails this many tasks in a row, each within ``quarantine_fast_s`` of
    #: its claim, while other workers of the app succeed (0: never).
    #: Env ``NOVA_QUARANTINE_FAST_FAILS``.
    quarantine_fast_fails: int = 5
    #: Env ``NOVA_QUARANTINE_FAST_S``.
    quarantine_fast_s: float = 2.0
    #: How long a quarantined worker waits before one probe task (doubling each time a probe
    #: fails too). Env ``NOVA_QUARANTINE_COOLDOWN_S``.
    quarantine_cooldown_s: float = 300.0
    #: How long a worker that could not prepare a job (its app's runtime, its model, the
    #: device) is not offered jobs of that app and model: its ``cannot_run`` mark lasts this
    #: long (or until it restarts). 1..86400 s. Env ``NOVA_CANNOT_RUN_S``.
    cannot_run_s: float = 600.0
    #: Whose share of the pool a job enqueued here uses (fair share between owners); empty:
    #: the login name. Env ``NOVA_OWNER`` (``enqueue --owner``).
    owner: str = ""
    #: Owner of the jobs the web gallery's form submits (its web token is one user's).
    #: Env ``NOVA_WEB_OWNER``.
    web_owner: str = "web"
    #: How long a worker waits for its app to stop after abandoning a task (timed out, or
    #: another attempt committed first) before it exits with code 75 for its supervisor to
    #: restart it. Env ``NOVA_ABANDON_GRACE_S``.
    abandon_grace_s: float = 30.0
    #: Approximate length cap of the event stream, in entries: an entry is one event, or the
    #: claimed or completed events of up to 64 tasks of one call (nova_queue/events.py,
    #: PACKED_TYPES). Env ``NOVA_EVENTS_MAXLEN``.
    events_maxlen: int = 100_000
    #: How long a finished (done or cancelled) job stays in Redis, with its tasks, before the
    #: retention sweep deletes it (``enqueue --retention`` per job); workers that left or were
    #: lost are forgotten after as long. Results in the store stay. 0..315360000 s (7 days).
    #: Env ``NOVA_JOB_RETENTION_S``.
    job_retention_s: int = DEFAULT_RETENTION_S
    #: Token that allows job submission in the web gallery (read-only without). Env ``NOVA_WEB_TOKEN``.
    web_token: str = ""
    #: Key that signs the gallery's session cookies (CSRF, write access); random per process
    #: when empty, so several web replicas must share one. Env ``NOVA_WEB_SECRET``.
    web_secret: str = ""
    #: Extra origins (comma-separated, ``https://gallery.example``) allowed to open the
    #: gallery's WebSockets besides its own host. Env ``NOVA_WEB_ALLOWED_ORIGINS``.
    web_allowed_origins: str = ""
    #: Host names the gallery answers to (comma-separated), against DNS rebinding. Empty:
    #: only loopback names (localhost, 127.0.0.1, [::1]) when it listens on a loopback
    #: address, any name otherwise. Env ``NOVA_WEB_TRUSTED_HOSTS``.
    web_trusted_hosts: str = ""
    #: Reverse proxies in front of the gallery whose ``X-Forwarded-For``, ``-Proto`` and
    #: ``-Host`` headers it trusts (werkzeug's ProxyFix): the client address the unlock rate
    #: limit counts and HTTPS (``Secure`` cookies) then come from them. 0 trusts none.
    #: Env ``NOVA_WEB_PROXY_HOPS``.
    web_proxy_hops: int = 0
    #: Largest request (prompt upload) the gallery accepts. Env ``NOVA_WEB_MAX_UPLOAD_BYTES``.
    web_max_upload_bytes: int = 2 * 1024 * 1024
    #: Live WebSockets one gallery process holds at once (8 per client address); each reads
    #: the event stream through a pool of its own of this many Redis connections, so pages
    #: keep theirs. Past it a socket is refused (503) and the page polls.
    #: Env ``NOVA_WEB_LIVE_SOCKETS``.
    web_live_sockets: int = 64
    #: Largest prompts input ``nova-queue enqueue`` reads (file or stdin), in bytes; more is
    #: refused unread. Env ``NOVA_MAX_PROMPT_BYTES`` (``enqueue --max-bytes``).
    max_prompt_bytes: int = DEFAULT_MAX_PROMPT_BYTES
    #: Public S3 endpoint for presigned image URLs; empty serves images through the web app.
    #: Env ``NOVA_S3_PUBLIC_ENDPOINT``.
    s3_public_endpoint: str = ""
    #: URL the post-worker POSTs a JSON summary to when a job finishes (RQ retries a non-2xx
    #: answer); empty sends nothing. Env ``NOVA_WEBHOOK_URL``.
    webhook_url: str = ""
    #: Folders (``os.pathsep``-separated) under which a txt2img job's ``model`` may name a
    #: pipeline folder, besides hub ids and the worker's own ``-o model=DIR``; empty: none.
    #: Env ``NOVA_MODEL_ROOTS``.
    model_roots: str = ""
    #: The gateway a worker joins through (``worker --gateway``): ``https://host[:port]``;
    #: empty: the worker talks to Redis and the store itself. Env ``NOVA_GATEWAY_URL``.
    gateway_url: str = ""
    #: The worker's gateway token (``nova-queue tokens create``); never logged or shown.
    #: Env ``NOVA_WORKER_TOKEN``.
    worker_token: str = dataclasses.field(default="", repr=False)
    #: A CA bundle (PEM file) the worker checks the gateway's TLS certificate against;
    #: empty: the system's. Env ``NOVA_GATEWAY_CA_BUNDLE``.
    gateway_ca_bundle: str = ""
    #: Seconds a worker waits for one gateway reply (a claim's long poll adds its wait).
    #: Env ``NOVA_GATEWAY_TIMEOUT_S``.
    gateway_timeout_s: float = 30.0
    #: Largest result the gateway accepts from a worker, in bytes (413 above).
    #: Env ``NOVA_GATEWAY_MAX_RESULT_BYTES``.
    gateway_max_result_bytes: int = 64 * 1024 * 1024
    #: Requests one token may make through the gateway per minute (429 + Retry-After above).
    #: Env ``NOVA_GATEWAY_RATE_PER_MIN``.
    gateway_rate_per_min: int = 6000
    #: Connections the gateway (on waitress) keeps open from one client address (an IPv6
    #: one by its /64); more are answered 503 and closed. Behind a proxy every connection
    #: comes from the proxy: raise it above the proxy's connections to the gateway (about
    #: two per worker), or 0 (no cap) and let the proxy limit each client.
    #: Env ``NOVA_GATEWAY_CONNECTIONS_PER_CLIENT``.
    gateway_connections_per_client: int = 200

    def __post_init__(self) -> None:
        check_namespace(self.namespace)
        self._check_leases()
        self._check_tasks()
        self._check_quarantine()
        self._check_servers()

    def _check_leases(self) -> None:
        if self.heartbeat_interval_s <= 0 or self.lease_ttl_s <= 0:
            raise ConfigError("heartbeat interval and lease TTL must be positive")
        # a holder renews at most one interval late and one more after an outage; the
        # grace trigger (WorkerCalls.gap_ms in client/worker.py) must fire before that can
        # expire a live lease
        if self.lease_ttl_s < 4 * self.heartbeat_interval_s:
            raise ConfigError(
                f"lease TTL ({self.lease_ttl_s:g} s) must be at least 4 x the heartbeat "
                f"interval ({self.heartbeat_interval_s:g} s)"
            )
        if self.abandon_grace_s <= 0:
            raise ConfigError("abandon grace must be positive")

    def _check_tasks(self) -> None:
        if self.max_attempts < 1:
            raise ConfigError("max attempts must be at least 1")
        if self.max_prompt_bytes < 1:
            raise ConfigError("max prompt bytes must be at least 1")
        if not 0 < self.ema_alpha <= 1:
            raise ConfigError("EMA alpha must be in (0, 1]")
        if not 0.001 <= self.task_timeout_floor_s <= 604_800:
            raise ConfigError("task timeout floor must be from 0.001 to 604800 s")
        if not 1 <= self.task_timeout_factor <= 1000:
            raise ConfigError("task timeout factor must be from 1 to 1000")
        if not 1 <= self.cannot_run_s <= 86_400:
            raise ConfigError("cannot-run mark time must be from 1 to 86400 s")
        if not 0 <= self.job_retention_s <= MAX_RETENTION_S:
            raise ConfigError(f"job retention must be from 0 to {MAX_RETENTION_S} s")
        if not 0 <= self.inline_result_bytes <= MAX_INLINE_BYTES:
            raise ConfigError(f"inline result bytes must be from 0 to {MAX_INLINE_BYTES}")
        if self.trust not in TRUST_LEVELS:
            raise ConfigError(f"trust must be one of {', '.join(TRUST_LEVELS)}, not "
                              f"{self.trust!r}")

    def _check_quarantine(self) -> None:
        if not 1 <= self.quarantine_after <= 1000 or not 0 <= self.quarantine_fast_fails <= 1000:
            raise ConfigError("quarantine after must be from 1 to 1000, fast fails from 0 to 1000")
        if not (0 <= self.quarantine_fast_s <= 86_400
                and 0.001 <= self.quarantine_cooldown_s <= 86_400):
            raise ConfigError("quarantine fast time must be from 0 to 86400 s, cool-down from "
                              "0.001 to 86400 s")

    def _check_servers(self) -> None:
        """The gallery's and the gateway's limits."""
        if self.web_max_upload_bytes < 1024:
            raise ConfigError("web max upload bytes must be at least 1024")
        if not 1 <= self.web_live_sockets <= 10_000:
            raise ConfigError("web live sockets must be from 1 to 10000")
        if self.gateway_max_result_bytes < 1024 or self.gateway_rate_per_min < 1:
            raise ConfigError("gateway max result bytes must be at least 1024, rate per "
                              "minute at least 1")
        if not 1 <= self.gateway_timeout_s <= 3600:
            raise ConfigError("gateway timeout must be from 1 to 3600 s")
        if self.gateway_connections_per_client < 0:
            raise ConfigError("gateway connections per client must be 0 (no cap) or more")

    @property
    def lease_ttl_ms(self) -> int:
        return int(self.lease_ttl_s * 1000)

    @property
    def heartbeat_interval_ms(self) -> int:
        return int(self.heartbeat_interval_s * 1000)

    @property
    def resolved_owner(self) -> str:
        """The owner of jobs enqueued with these settings: ``owner``, else the login name."""
        if self.owner:
            return self.owner
        import getpass

        try:
            return getpass.getuser()
        except (KeyError, OSError):
            return "anonymous"

    @property
    def resolved_store_url(self) -> str:
        """The store URL, defaulting to a file store under ``home``."""
        if self.store_url:
            return self.store_url
        return (Path(self.home).resolve() / ".nova" / "results").as_uri()

    @classmethod
    def from_env(
        cls, prefix: str = "NOVA_", environ: Mapping[str, str] | None = None, **overrides: object
    ) -> Settings:
        """Build settings from ``{prefix}FIELD`` variables; ``overrides`` win over the environment."""
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        for field in dataclasses.fields(cls):
            raw = env.get(prefix + field.name.upper())
            if raw is None and field.name == "redis_url":
                raw = env.get("REDIS_URL")
            if raw is None or raw == "":
                continue
            values[field.name] = _convert(field, raw, prefix)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)  # type: ignore[arg-type]


def _convert(field: dataclasses.Field, raw: str, prefix: str) -> object:
    kind = field.type if isinstance(field.type, str) else field.type.__name__
    try:
        if kind == "float":
            return float(raw)
        if kind == "int":
            return int(raw)
    except ValueError:
        raise ConfigError(f"{prefix}{field.name.upper()}={raw!r} is not a valid {kind}") from None
    return raw
