"""Write access: the web token, server-side unlock sessions and the unlock rate limit.

- Without ``NOVA_WEB_TOKEN`` the gallery is read-only and writes nothing to Redis.
- A correct token *unlocks* the session. The server draws a random nonce, keeps
  ``web:session:<sha256(nonce)>`` in Redis for :data:`UNLOCK_TTL_S` holding an HMAC of the
  token under the app's ``SECRET_KEY`` (``NOVA_WEB_SECRET``), and the signed session cookie
  carries only the nonce. So a stolen cookie reveals nothing about the token (no offline
  guessing); *Lock* deletes the Redis key, so a copy of the cookie dies with it; a changed
  token no longer matches the stored HMAC, so every session locks. Replicas that share
  ``NOVA_WEB_SECRET`` and Redis share the sessions.
- Every request that sends a token counts against its client address (IPv6: its /64) in
  ``web:fails:<client>``: past :data:`MAX_ATTEMPTS` within :data:`ATTEMPT_WINDOW_S` the
  address gets 429 with ``Retry-After`` until the window ends, before the token is
  compared. A correct token clears the count. Counts live in Redis, so replicas share
  them. Behind a reverse proxy set ``NOVA_WEB_PROXY_HOPS`` so the client address comes
  from ``X-Forwarded-For``.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import math
import secrets
import threading
from collections.abc import Callable
from typing import Any

from flask import Flask, current_app, g, render_template, request, session

from nova_queue.clientaddr import client_name
from nova_queue.web.extensions import nova
from nova_queue.web.security import WriteDenied, check_csrf

log = logging.getLogger(__name__)

TOKEN_FIELD = "token"
#: How long an unlocked session keeps write access (it ends sooner on Lock or a new token).
UNLOCK_TTL_S = 12 * 3600
#: Token attempts one client address may make per window ...
MAX_ATTEMPTS = 10
#: ... and the window, counted from its first attempt.
ATTEMPT_WINDOW_S = 300
_SESSION_FIELD = "write"


def write_enabled() -> bool:
    """Whether a write token is configured (otherwise the gallery is read-only)."""
    return bool(nova.settings.web_token)


def _fingerprint(token: str) -> str:
    key = current_app.secret_key
    key_bytes = key if isinstance(key, bytes) else str(key).encode()
    message = b"nova-queue web token\x00" + token.encode("utf-8", "surrogatepass")
    return hmac.new(key_bytes, message, hashlib.sha256).hexdigest()


def _session_key(nonce: str) -> str:
    digest = hashlib.sha256(nonce.encode("utf-8", "surrogatepass")).hexdigest()
    return nova.client.keys.web_session(digest)


def is_unlocked() -> bool:
    """Whether this session proved it knows the current write token (one Redis GET per
    request)."""
    if "nova_unlocked" not in g:
        token, nonce = nova.settings.web_token, session.get(_SESSION_FIELD)
        ok = False
        if token and isinstance(nonce, str) and nonce:
            stored = nova.client.redis.get(_session_key(nonce))
            ok = isinstance(stored, str) and hmac.compare_digest(stored, _fingerprint(token))
        g.nova_unlocked = ok
    return bool(g.nova_unlocked)


def _unlock(token: str) -> None:
    old = session.get(_SESSION_FIELD)
    nonce = secrets.token_urlsafe(32)
    pipe = nova.client.redis.pipeline(transaction=False)
    if isinstance(old, str) and old:
        pipe.delete(_session_key(old))
    pipe.set(_session_key(nonce), _fingerprint(token), ex=UNLOCK_TTL_S)
    pipe.execute()
    session[_SESSION_FIELD] = nonce
    g.nova_unlocked = True


def lock_session() -> None:
    """Forget write access for this session, here and in Redis."""
    nonce = session.pop(_SESSION_FIELD, None)
    if isinstance(nonce, str) and nonce:
        nova.client.redis.delete(_session_key(nonce))
    g.nova_unlocked = False


def client_address() -> str:
    """The rate limit's name for the client: its IP address, an IPv6 one by its /64
    (:func:`nova_queue.clientaddr.client_name`)."""
    return client_name(request.remote_addr or "")


def _count_attempt(client: str) -> None:
    """Count one token attempt; raise WriteDenied (429) past the limit."""
    key = nova.client.keys.web_unlock_fails(client)
    redis = nova.client.redis
    pipe = redis.pipeline(transaction=False)
    pipe.set(key, 0, ex=ATTEMPT_WINDOW_S, nx=True)
    pipe.incr(key)
    pipe.pttl(key)
    _, count, ttl_ms = pipe.execute()
    if ttl_ms < 0:  # the key expired between SET and INCR: INCR made one without a TTL
        redis.expire(key, ATTEMPT_WINDOW_S)
        ttl_ms = ATTEMPT_WINDOW_S * 1000
    if count > MAX_ATTEMPTS:
        retry_after_s = max(1, math.ceil(ttl_ms / 1000))
        if count == MAX_ATTEMPTS + 1:
            log.warning("web token attempts from %s over the limit (%d in %d s); refused "
                        "for %d s", client, MAX_ATTEMPTS, ATTEMPT_WINDOW_S, retry_after_s)
        raise WriteDenied(f"Too many web token attempts from this address: try again in "
                          f"{retry_after_s} s.", 429, retry_after_s)


def require_write() -> None:
    """Raise WriteDenied unless the POST has a valid CSRF token and write access; a
    correct token in the form unlocks the session."""
    token = nova.settings.web_token
    if not token:
        raise WriteDenied("This gallery is read-only: start the web app with NOVA_WEB_TOKEN "
                          "set to enable submissions and requeues.")
    check_csrf()
    given = request.form.get(TOKEN_FIELD, "")
    if given:
        client = client_address()
        _count_attempt(client)
        if not hmac.compare_digest(given.encode("utf-8", "surrogatepass"),
                                   token.encode("utf-8", "surrogatepass")):
            raise WriteDenied("Wrong web token.")
        nova.client.redis.delete(nova.client.keys.web_unlock_fails(client))
        _unlock(token)
        return
    if not is_unlocked():
        raise WriteDenied("This action needs the web token (NOVA_WEB_TOKEN).")


def denied(exc: WriteDenied) -> Any:
    """The error page of a refused write (a 429 with its ``Retry-After``)."""
    title = "Too many attempts" if exc.status == 429 else "Not allowed"
    return (render_template("error.html", code=exc.status, title=title, message=exc.message),
            exc.status, exc.headers)


#: Headers a reverse proxy adds; seen while NOVA_WEB_PROXY_HOPS is 0, they mean that every
#: client behind the proxy has the proxy's address.
PROXY_HEADERS = ("X-Forwarded-For", "Forwarded", "X-Real-IP")


def _warn_if_proxied() -> Callable[[], None]:
    """before_request: the first request that carries a proxy's header while
    ``NOVA_WEB_PROXY_HOPS`` is 0 logs one warning naming the setting (the unlock rate limit
    and the live-socket caps would count every client behind the proxy as one)."""
    warned = threading.Event()

    def check() -> None:
        if warned.is_set() or not any(h in request.headers for h in PROXY_HEADERS):
            return
        warned.set()
        log.warning("requests carry %s but NOVA_WEB_PROXY_HOPS is 0: behind a reverse proxy "
                    "every client has the proxy's address, so one client can use up the web "
                    "token's unlock attempts and the live sockets for everyone. Set "
                    "NOVA_WEB_PROXY_HOPS to the number of proxies in front of the gallery "
                    "(a client that sends the header itself also causes this warning)",
                    "/".join(h for h in PROXY_HEADERS if h in request.headers))

    return check


def init_app(app: Flask) -> None:
    """The ``write_enabled`` / ``is_unlocked`` / ``TOKEN_FIELD`` template globals, and the
    warning of a proxy in front while ``NOVA_WEB_PROXY_HOPS`` is 0."""
    app.jinja_env.globals.update(write_enabled=write_enabled, is_unlocked=is_unlocked,
                                 TOKEN_FIELD=TOKEN_FIELD)
    if not app.config["NOVA_SETTINGS"].web_proxy_hops:
        app.before_request(_warn_if_proxied())
