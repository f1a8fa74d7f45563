"""The app factory and the server the ``nova-queue web`` command runs.

Configuration comes from :class:`nova_queue.settings.Settings`: Redis, namespace, store,
``NOVA_WEB_TOKEN`` (submission; read-only without), ``NOVA_S3_PUBLIC_ENDPOINT``, and the
web fields ``NOVA_WEB_SECRET`` (signs session cookies; **several web replicas behind one
address must share one**), ``NOVA_WEB_ALLOWED_ORIGINS`` (extra WebSocket origins),
``NOVA_WEB_TRUSTED_HOSTS`` (host allow-list against DNS rebinding; when empty and the app
listens on a loopback address, only loopback names), ``NOVA_WEB_PROXY_HOPS`` (trusted
``X-Forwarded-*`` headers), ``NOVA_WEB_MAX_UPLOAD_BYTES`` and ``NOVA_WEB_LIVE_SOCKETS``
(live sockets held at once: ``sockets.py``).

All state lives in Redis, so the process can restart at any time. ``serve`` runs
werkzeug's threaded server (one thread per connection; a WebSocket holds one; set up in
``nova_queue/serving.py``, shared with the gateway); for more
load run ``create_app()`` under gunicorn with ``--worker-class gthread --threads N``.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import secrets
from collections.abc import Callable, Mapping
from typing import Any

import redis
from flask import Flask, Response, jsonify, render_template, request
from werkzeug.exceptions import HTTPException, SecurityError
from werkzeug.middleware.proxy_fix import ProxyFix
from werkzeug.serving import BaseWSGIServer

from nova_queue.client import NovaClient
from nova_queue.errors import ConfigError, NovaError, ProtocolMismatchError
from nova_queue.serving import serve_until_interrupted, werkzeug_server
from nova_queue.settings import Settings
from nova_queue.stores import ResultStore
from nova_queue.web import (
    api,
    auth,
    forms,
    live,
    metrics,
    results,
    security,
    sockets,
    views_events,
    views_failed,
    views_jobs,
    views_owners,
    views_workers,
)
from nova_queue.web.extensions import nova, sock, state_of
from nova_queue.web.text import backend_label, fmt_bytes, fmt_seconds, visible_bidi

log = logging.getLogger(__name__)

#: The host names a gallery listening on a loopback address answers to by default (with any
#: port; see ``security.host_trusted``).
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")


def _origins(raw: str) -> list[str]:
    return [o.strip() for o in raw.split(",") if o.strip()]


def is_loopback(host: str) -> bool:
    """Whether a listen address is a loopback one (``localhost``, 127.0.0.0/8, ``::1``)."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def trusted_hosts(settings: Settings, bind_host: str | None = None) -> list[str] | None:
    """``NOVA_WEB_TRUSTED_HOSTS``; when empty, the loopback names if the app listens on a
    loopback address; else None (any host)."""
    configured = _origins(settings.web_trusted_hosts)
    if configured:
        return configured
    if bind_host is not None and is_loopback(bind_host):
        return list(LOOPBACK_HOSTS)
    return None


def create_app(test_config: Mapping[str, Any] | None = None, *,
               settings: Settings | None = None, client: NovaClient | None = None,
               store: ResultStore | None = None, bind_host: str | None = None) -> Flask:
    """Build the web app; ``test_config`` overrides Flask config keys. ``bind_host`` is the
    address it will listen on (unknown under gunicorn): a loopback one restricts the
    trusted host names to loopback ones unless ``NOVA_WEB_TRUSTED_HOSTS`` is set."""
    settings = settings or Settings.from_env()
    if settings.web_proxy_hops < 0:
        raise ConfigError("NOVA_WEB_PROXY_HOPS must be 0 or more")
    app = Flask(__name__)
    app.config.from_mapping(
        SECRET_KEY=settings.web_secret or None,
        MAX_CONTENT_LENGTH=settings.web_max_upload_bytes,
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        NOVA_WEB_ALLOWED_ORIGINS=_origins(settings.web_allowed_origins),
        NOVA_WEB_TRUSTED_HOSTS=trusted_hosts(settings, bind_host),
        SOCK_SERVER_OPTIONS={"ping_interval": 25, "max_message_size": 4096},
        NOVA_SETTINGS=settings,
    )
    if test_config:
        app.config.from_mapping(test_config)
    if not app.config["SECRET_KEY"]:
        log.info("NOVA_WEB_SECRET is not set: sessions use a random key and end on restart "
                 "(set it when running several web replicas)")
        app.config["SECRET_KEY"] = secrets.token_hex(32)
    # Every {{ value }} in a template shows bidi controls as visible markers.
    app.jinja_options = {**app.jinja_options, "finalize": visible_bidi}

    if settings.web_proxy_hops:
        hops = settings.web_proxy_hops
        app.wsgi_app = ProxyFix(  # type: ignore[method-assign]
            app.wsgi_app, x_for=hops, x_proto=hops, x_host=hops)
    nova.init_app(app, client=client, store=store)
    sock.init_app(app)
    security.init_app(app)
    auth.init_app(app)
    sockets.init_app(app)
    forms.init_app(app)
    app.jinja_env.filters.update(seconds=fmt_seconds, bytes=fmt_bytes, backend=backend_label)
    for module in (views_jobs, views_workers, views_owners, views_events, views_failed, api, live,
                   results, metrics):
        app.register_blueprint(module.bp)
    metrics.init_app(app, state_of(app).client)
    app.before_request(functools.partial(_check_protocol, state_of(app)))
    _register_errors(app)
    return app


def _check_protocol(state: Any) -> None:
    """Before each request: a namespace of another protocol answers 503 (asked every 30 s);
    with Redis down the page's own reads answer that."""
    try:
        state.check_protocol()
    except redis.RedisError:
        pass


def _wants_json() -> bool:
    return request.path.startswith("/api/")


def _register_errors(app: Flask) -> None:
    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> Any:
        code = exc.code or 500
        if isinstance(exc, SecurityError):  # untrusted Host: no URLs can be built
            return Response(f"{code} {exc.name}: untrusted host\n", code, mimetype="text/plain")
        if code == 413:
            limit = app.config["MAX_CONTENT_LENGTH"]
            message = (f"The upload is too large: the limit is {fmt_bytes(limit)}. "
                       "Split the prompts into several jobs.")
        else:
            message = exc.description or exc.name
        if _wants_json():
            return jsonify({"error": message}), code
        return render_template("error.html", code=code, title=exc.name, message=message), code

    @app.errorhandler(redis.RedisError)
    def redis_error(exc: redis.RedisError) -> Any:
        log.warning("Redis error while serving %s: %s", request.path, exc)
        message = "Redis is unreachable right now; this page will work again once it is back."
        if _wants_json():
            return jsonify({"error": message}), 503
        return render_template("error.html", code=503, title="Redis unavailable",
                               message=message), 503

    @app.errorhandler(ProtocolMismatchError)
    def protocol_mismatch(exc: ProtocolMismatchError) -> Any:
        log.error("refusing to serve: %s", exc)
        if _wants_json():
            return jsonify({"error": str(exc)}), 503
        return render_template("error.html", code=503, title="Protocol mismatch",
                               message=str(exc)), 503

    @app.errorhandler(NovaError)
    def nova_error(exc: NovaError) -> Any:
        if _wants_json():
            return jsonify({"error": str(exc)}), 400
        return render_template("error.html", code=400, title="Error", message=str(exc)), 400


def make_web_server(settings: Settings, host: str = "127.0.0.1", port: int = 8000,
                    app: Flask | None = None) -> BaseWSGIServer:
    """The app (made from ``settings`` unless given) on werkzeug's threaded server
    (``nova_queue/serving.py``), bound but not yet serving (``.port`` is the bound port).
    Raises OSError when the address cannot be bound."""
    return werkzeug_server(app or create_app(settings=settings, bind_host=host), host, port)


def serve(settings: Settings, host: str = "127.0.0.1", port: int = 8000, *,
          on_ready: Callable[[int], None] | None = None) -> None:
    """Serve until interrupted; ``on_ready`` gets the bound port (useful with port 0)."""
    app = create_app(settings=settings, bind_host=host)
    try:
        state_of(app).check_protocol()  # refuse to start on a namespace of another protocol
    except redis.RedisError as exc:  # Redis not up yet: every page checks again
        log.warning("cannot check the namespace's protocol version yet: %s", exc)
    server = make_web_server(settings, host, port, app)
    log.debug("nova-queue web serving on http://%s:%d", host, server.port)
    serve_until_interrupted(server, on_ready, state_of(app).close)
