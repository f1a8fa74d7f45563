"""The gateway's app factory, its error answers, and the server ``nova-queue gateway`` runs.

The gateway holds the Redis and result-store credentials and exposes only the worker
protocol (``routes.py``) as JSON over HTTP: a worker needs its token and outbound HTTPS,
nothing else. It keeps no state between requests (tokens, worker ids, leases and rate
counts all live in Redis), so several gateways can serve one pool side by side and any of
them can be restarted at any time. Serve it behind a TLS reverse proxy. ``serve`` runs it
on waitress (``nova-queue[gateway]``): HTTP/1.1 keep-alive, so a worker's calls reuse one
connection, and a fixed pool of threads (a claim's long poll holds one for up to 10 s);
without waitress, or with ``--server werkzeug``, on the threaded werkzeug server
``nova-queue web`` uses, which closes each connection after one answer (both set up in
``nova_queue/serving.py``, shared with the gallery). Measured side by
side (``benchmarks/gateway_profile.py``), waitress answers a commit about 0.5-0.8 ms
sooner. Under gunicorn, use ``--worker-class gthread``.

Every error is ``{"error": message, "kind": kind}`` with the status the worker's link
(``nova_queue.workers.link``) turns back into the exception the direct worker sees.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis
from flask import Flask, current_app, jsonify, request
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from nova_queue import errors, serving, wire
from nova_queue.client import NovaClient
from nova_queue.dist import WheelCache
from nova_queue.serving import WaitressLimits
from nova_queue.settings import Settings
from nova_queue.stores import ResultStore, open_store
from nova_queue.web.gateway import commits, dist, routes
from nova_queue.web.gateway.auth import AUTH_LUA, RateLimited

log = logging.getLogger(__name__)

#: What a commit may add to its result's bytes: its JSON (``wire.MAX_COMMIT_HEAD_BYTES``)
#: and, in a multipart body, the parts' headers; a batch's JSON
#: (``wire.MAX_BATCH_HEAD_BYTES``) to its results'.
UPLOAD_OVERHEAD_BYTES = max(2 * wire.MAX_COMMIT_HEAD_BYTES, wire.MAX_BATCH_HEAD_BYTES)

#: exception -> (HTTP status, kind); the first match in this order wins
_ANSWERS: tuple[tuple[type[Exception], int, str], ...] = (
    (errors.TokenError, 401, "token"),
    (errors.AccessDeniedError, 403, "denied"),
    (errors.StaleResultError, 403, "stale"),
    (errors.WorkerLostError, 409, "worker_lost"),
    (errors.ProtocolMismatchError, 409, "protocol"),
    (errors.ConfigError, 409, "protocol"),
    (errors.ResultTooLargeError, 413, "too_large"),
    (errors.ObjectExistsError, 409, "exists"),
    (errors.StoreError, 503, "store"),
    (errors.TaskNotFoundError, 404, "not_found"),
    (errors.JobNotFoundError, 404, "not_found"),
    (errors.InputError, 400, "input"),
    (errors.NovaError, 400, "input"),
)


@dataclasses.dataclass
class GatewayState:
    """What every request uses: settings, the NovaClient and the result store."""

    settings: Settings
    client: NovaClient
    store: ResultStore
    #: the token, rate and lease-holder lookup of every request (``auth.py``)
    auth_script: Any = None

    def __post_init__(self) -> None:
        if self.auth_script is None:
            self.auth_script = self.client.redis.register_script(AUTH_LUA)

    def close(self) -> None:
        self.client.close()
        self.store.close()


def create_app(test_config: dict[str, Any] | None = None, *, settings: Settings | None = None,
               client: NovaClient | None = None, store: ResultStore | None = None) -> Flask:
    """Build the gateway app; ``test_config`` overrides Flask config keys."""
    settings = settings or Settings.from_env()
    app = Flask(__name__)
    app.config.from_mapping(
        MAX_CONTENT_LENGTH=settings.gateway_max_result_bytes + UPLOAD_OVERHEAD_BYTES,
        NOVA_SETTINGS=settings)
    if test_config:
        app.config.from_mapping(test_config)
    client = client or NovaClient.from_settings(settings)
    store = store or open_store(settings.resolved_store_url)
    app.extensions["nova_gateway"] = GatewayState(settings, client, store)
    # the wheel joining machines install (gateway/dist.py), made in <NOVA_HOME>/.nova/dist
    app.extensions["nova_wheel"] = WheelCache(Path(settings.home) / ".nova" / "dist")
    app.register_blueprint(routes.bp)
    app.register_blueprint(commits.bp)
    app.register_blueprint(dist.bp)
    app.before_request(_refuse_oversized)
    _register_errors(app)
    return app


def _refuse_oversized() -> None:
    """A body its length says is over the limit is 413 before its token is checked, as
    waitress answers it before the app runs (werkzeug's server would let the app run)."""
    limit = current_app.config["MAX_CONTENT_LENGTH"]
    if limit is not None and (request.content_length or 0) > limit:
        raise RequestEntityTooLarge()


def _register_errors(app: Flask) -> None:
    @app.errorhandler(RateLimited)
    def rate_limited(exc: RateLimited) -> Any:
        resp = jsonify({"error": str(exc), "kind": "rate"})
        resp.headers["Retry-After"] = str(exc.retry_after_s)
        return resp, 429

    @app.errorhandler(errors.NovaError)
    def nova_error(exc: errors.NovaError) -> Any:
        for kind_of, status, kind in _ANSWERS:
            if isinstance(exc, kind_of):
                break
        body: dict[str, Any] = {"error": str(exc), "kind": kind}
        if isinstance(exc, errors.StaleResultError):
            body.update(error=exc.reason, task_id=exc.task_id)
        if status >= 500:
            log.warning("%s: %s", kind, exc)
        return jsonify(body), status

    @app.errorhandler(redis.RedisError)
    def redis_error(exc: redis.RedisError) -> Any:
        log.warning("Redis error: %s", exc)
        return jsonify({"error": "Redis is unreachable from the gateway", "kind": "unavailable"}), 503

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> Any:
        code = exc.code or 500
        message = exc.description or exc.name
        if code == 413:
            limit = app.config["NOVA_SETTINGS"].gateway_max_result_bytes
            message = f"the result is larger than the gateway accepts ({limit} bytes)"
        return jsonify({"error": message, "kind": "too_large" if code == 413 else "http"}), code


#: waitress's limits for the gateway (``nova_queue/serving.py``): 64 requests served at
#: once (a claim's long poll holds one for up to 10 s), 1,000 connections in all (each
#: worker thread keeps one alive), idle ones closed after 30 s; ``serve`` adds the body
#: limit and NOVA_GATEWAY_CONNECTIONS_PER_CLIENT.
LIMITS = WaitressLimits()
DEFAULT_THREADS = LIMITS.threads


def serve(settings: Settings, host: str = "127.0.0.1", port: int = 8700, *,
          on_ready: Callable[[int], None] | None = None, server: str | None = None,
          threads: int = DEFAULT_THREADS) -> None:
    """Serve until interrupted on ``server`` (``serving.SERVERS``; default: waitress when it
    is installed, else werkzeug); ``on_ready`` gets the bound port (useful with port 0)."""
    app = create_app(settings=settings)
    state = app.extensions["nova_gateway"]
    app.extensions["nova_wheel"].start()  # in the background: workers are served meanwhile
    try:
        from nova_queue import protocol

        protocol.check(state.client.redis, state.client.keys)
    except redis.RedisError as exc:  # Redis not up yet: each request answers 503 meanwhile
        log.warning("cannot check the namespace's protocol version yet: %s", exc)
    # waitress buffers a request's body before the app runs, up to the app's size limit
    # (413 above, before the app sees it); one client keeps at most
    # NOVA_GATEWAY_CONNECTIONS_PER_CLIENT connections
    limits = dataclasses.replace(
        LIMITS, threads=threads, max_request_body_bytes=app.config["MAX_CONTENT_LENGTH"],
        per_client=settings.gateway_connections_per_client,
        per_client_setting="NOVA_GATEWAY_CONNECTIONS_PER_CLIENT")
    bound = serving.bind(app, host, port, server=server or serving.default_server(),
                         limits=limits, ident="nova-queue-gateway")
    serving.serve_until_interrupted(bound, on_ready, state.close)
