"""Security policy: response headers, CSRF tokens, the write token, WebSocket Origin checks.

- Every response carries a CSP without inline scripts (JS lives in ``static/``), framing
  denied, ``nosniff`` and a same-origin referrer policy.
- Writes (submitting a job, requeueing a task) need ``Settings.web_token``
  (``NOVA_WEB_TOKEN``); without one the app is read-only. A correct token also unlocks the
  session (a signed cookie) so later actions need no retyping; changing the token locks
  every session again. Every POST carries the session's CSRF token.
- WebSocket handshakes are refused unless the ``Origin`` is this host or listed in
  ``NOVA_WEB_ALLOWED_ORIGINS``; clients that send no Origin (not browsers) are let in.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import urllib.parse
from collections.abc import Iterable

from flask import Flask, Response, current_app, request, session
from werkzeug.exceptions import SecurityError

from nova_queue.web.extensions import nova

_HOST_RE = re.compile(r"^[A-Za-z0-9.-]+(:\d{1,5})?$|^\[[0-9A-Fa-f:.]+\](:\d{1,5})?$")
CSRF_FIELD = "csrf_token"
TOKEN_FIELD = "token"


class WriteDenied(Exception):
    """A write was refused: read-only app, bad CSRF token or bad write token."""

    def __init__(self, message: str, status: int = 403):
        super().__init__(message)
        self.message, self.status = message, status


def csrf_token() -> str:
    """This session's CSRF token (created on first use)."""
    token = session.get("csrf")
    if not token:
        token = session["csrf"] = secrets.token_urlsafe(32)
    return token


def write_enabled() -> bool:
    """Whether a write token is configured (otherwise the gallery is read-only)."""
    return bool(nova.settings.web_token)


def _mark(token: str) -> str:
    # Stored in the session instead of the token itself; tied to the current token.
    return hmac.new(token.encode(), b"nova-queue web write access", hashlib.sha256).hexdigest()


def is_unlocked() -> bool:
    """Whether this session proved it knows the current write token."""
    token = nova.settings.web_token
    mark = session.get("write")
    return bool(token and isinstance(mark, str) and hmac.compare_digest(mark, _mark(token)))


def check_csrf() -> None:
    """Raise WriteDenied (400) unless the form carries this session's CSRF token."""
    expected, sent = session.get("csrf"), request.form.get(CSRF_FIELD, "")
    if not (isinstance(expected, str) and sent and hmac.compare_digest(expected, sent)):
        raise WriteDenied("The form's CSRF token is missing or expired: reload the page and "
                          "try again.", 400)


def require_write() -> None:
    """Raise WriteDenied unless the POST has a valid CSRF token and write access."""
    token = nova.settings.web_token
    if not token:
        raise WriteDenied("This gallery is read-only: start the web app with NOVA_WEB_TOKEN "
                          "set to enable submissions and requeues.")
    check_csrf()
    given = request.form.get(TOKEN_FIELD, "")
    if given:
        if not hmac.compare_digest(given.encode(), token.encode()):
            raise WriteDenied("Wrong web token.")
        session["write"] = _mark(token)
        return
    if not is_unlocked():
        raise WriteDenied("This action needs the web token (NOVA_WEB_TOKEN).")


def lock_session() -> None:
    """Forget write access for this session."""
    session.pop("write", None)


def origin_allowed(origin: str | None, host: str, allowed: Iterable[str] = ()) -> bool:
    """Whether a WebSocket handshake from ``origin`` to ``host`` may proceed."""
    if origin is None:
        return True
    origin = origin.strip().rstrip("/").lower()
    if origin in {a.strip().rstrip("/").lower() for a in allowed}:
        return True
    parts = urllib.parse.urlsplit(origin)
    return parts.scheme in ("http", "https") and bool(parts.netloc) \
        and parts.netloc == host.lower()


def _public_origin(endpoint: str) -> str:
    parts = urllib.parse.urlsplit(endpoint)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else ""


def content_security_policy() -> str:
    """The CSP of every page: scripts, styles and sockets from this origin only."""
    img = "'self' data:"
    public = _public_origin(nova.settings.s3_public_endpoint)
    if public:
        img += f" {public}"  # presigned result URLs redirect there
    try:
        host = request.host
    except SecurityError:  # not in TRUSTED_HOSTS: this response is the 400 for that
        host = ""
    # 'self' covers same-origin sockets in current browsers; older ones need them spelled out.
    sockets = f" ws://{host} wss://{host}" if _HOST_RE.match(host) else ""
    return ("default-src 'self'; script-src 'self'; style-src 'self'; "
            f"img-src {img}; connect-src 'self'{sockets}; "
            "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")


def add_security_headers(response: Response) -> Response:
    """after_request hook: security headers on every response."""
    headers = response.headers
    headers.setdefault("Content-Security-Policy", content_security_policy())
    headers.setdefault("X-Frame-Options", "DENY")
    headers.setdefault("X-Content-Type-Options", "nosniff")
    headers.setdefault("Referrer-Policy", "same-origin")
    headers.setdefault("Cross-Origin-Opener-Policy", "same-origin")
    if response.mimetype == "text/html" and "Cache-Control" not in headers:
        headers["Cache-Control"] = "no-store"  # pages carry CSRF tokens and live state
    return response


def init_app(app: Flask) -> None:
    """Install the headers hook and the ``csrf_token`` / ``write_enabled`` template globals."""
    app.after_request(add_security_headers)
    app.jinja_env.globals.update(csrf_token=csrf_token, write_enabled=write_enabled,
                                 is_unlocked=is_unlocked, CSRF_FIELD=CSRF_FIELD,
                                 TOKEN_FIELD=TOKEN_FIELD)


def check_origin() -> bool:
    """Whether the current request's Origin may open a WebSocket here."""
    allowed = current_app.config.get("NOVA_WEB_ALLOWED_ORIGINS", ())
    return origin_allowed(request.headers.get("Origin"), request.host, allowed)
