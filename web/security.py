"""Security policy: response headers, the session cookie, CSRF tokens, ``next`` paths,
WebSocket Origin checks. (The write token and unlocking live in ``auth.py``.)

- Every response carries a CSP without inline scripts (JS lives in ``static/``), framing
  denied, ``nosniff`` and a same-origin referrer policy.
- The session cookie is signed (``NOVA_WEB_SECRET``), ``HttpOnly``, ``SameSite=Lax`` and
  ``Secure`` whenever the request came over HTTPS.
- Every POST carries the session's CSRF token.
- The unlock and lock forms send the page back as ``next``; only a path on this site is
  followed (:func:`safe_next_path`), anything else goes home.
- WebSocket handshakes are refused unless the ``Origin`` is this host or listed in
  ``NOVA_WEB_ALLOWED_ORIGINS``; clients that send no Origin (not browsers) are let in.
"""

from __future__ import annotations

import hmac
import re
import secrets
import unicodedata
import urllib.parse
from collections.abc import Iterable

from flask import Flask, Response, current_app, has_request_context, request, session
from flask.sessions import SecureCookieSessionInterface
from werkzeug.exceptions import SecurityError

from nova_queue.web.extensions import nova

_HOST_RE = re.compile(r"^[A-Za-z0-9.-]+(:\d{1,5})?$|^\[[0-9A-Fa-f:.]+\](:\d{1,5})?$")
_HOST_NAME_RE = re.compile(r"^(\[[0-9a-f:.]+\]|[a-z0-9.-]+)(?::\d{1,5})?$")
CSRF_FIELD = "csrf_token"
#: Longest ``next`` path the unlock and lock forms may send back.
MAX_NEXT_CHARS = 2048
#: Unicode categories never allowed in a ``next`` path: controls, format characters
#: (bidi, zero-width), surrogates, line and paragraph separators.
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


class WriteDenied(Exception):
    """A write was refused: read-only app, bad CSRF token, bad write token, rate limit."""

    def __init__(self, message: str, status: int = 403, retry_after_s: int | None = None):
        super().__init__(message)
        self.message, self.status, self.retry_after_s = message, status, retry_after_s

    @property
    def headers(self) -> dict[str, str]:
        """Response headers that go with the refusal (``Retry-After`` for 429)."""
        return {"Retry-After": str(self.retry_after_s)} if self.retry_after_s else {}


def csrf_token() -> str:
    """This session's CSRF token (created on first use)."""
    token = session.get("csrf")
    if not token:
        token = session["csrf"] = secrets.token_urlsafe(32)
    return token


def check_csrf() -> None:
    """Raise WriteDenied (400) unless the form carries this session's CSRF token."""
    expected, sent = session.get("csrf"), request.form.get(CSRF_FIELD, "")
    if not (isinstance(expected, str) and sent and hmac.compare_digest(expected, sent)):
        raise WriteDenied("The form's CSRF token is missing or expired: reload the page and "
                          "try again.", 400)


def safe_next_path(target: str | None, default: str = "/") -> str:
    r"""``target`` if it is a path on this site, else ``default`` (an open-redirect guard).

    Refused: anything not starting with one ``/``, a leading ``//`` or ``/\``, backslashes,
    whitespace, control and format characters (browsers drop tabs and newlines, so
    ``/<TAB>/evil.example`` would become ``//evil.example``; CR/LF would split the header),
    and anything :func:`urllib.parse.urlsplit` sees a scheme or an authority in.
    """
    if not target or len(target) > MAX_NEXT_CHARS or not target.startswith("/"):
        return default
    if any(c == "\\" or c.isspace() or unicodedata.category(c) in _REFUSED_CATEGORIES
           for c in target):
        return default
    if target.startswith("//"):
        return default
    parts = urllib.parse.urlsplit(target)
    if parts.scheme or parts.netloc:
        return default
    return target


def next_path() -> str:
    """The current page as a safe ``next`` target for the unlock and lock forms."""
    return safe_next_path(request.path)


def _host_name(value: str) -> str | None:
    """The name part of ``name[:port]``, lowercase (IPv6 keeps its brackets); None if
    malformed. A bare IPv6 address (``::1``) counts as ``[::1]``."""
    value = value.strip().lower()
    if value.count(":") > 1 and not value.startswith("["):
        value = f"[{value}]"
    m = _HOST_NAME_RE.match(value)
    return m.group(1) if m else None


def host_trusted(host: str, trusted: Iterable[str]) -> bool:
    """Whether a ``Host`` value names one of ``trusted``: any port, any case; a name with a
    leading dot (``.example.com``) also matches its subdomains. (werkzeug's own
    ``TRUSTED_HOSTS`` check cannot match IPv6 names such as ``[::1]``.)"""
    name = _host_name(host)
    if not name:
        return False
    for ref in trusted:
        ref = ref.strip().lower()
        if ref.startswith("."):
            if name == ref[1:] or name.endswith(ref):
                return True
        elif _host_name(ref) == name:
            return True
    return False


def request_host() -> str:
    """This request's ``Host`` if it is trusted, else ``""``."""
    try:
        host = request.host
    except SecurityError:  # not in Flask's TRUSTED_HOSTS
        return ""
    trusted = current_app.config.get("NOVA_WEB_TRUSTED_HOSTS")
    return host if not trusted or host_trusted(host, trusted) else ""


def check_host() -> None:
    """before_request: refuse (400) a request whose ``Host`` is not trusted, before any
    redirect or WebSocket handshake is built on it (against DNS rebinding)."""
    trusted = current_app.config.get("NOVA_WEB_TRUSTED_HOSTS")
    if trusted and not host_trusted(request.host, trusted):  # request.host may raise too
        raise SecurityError("untrusted host")


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
    host = request_host()  # "" when untrusted: this response is the 400 for that
    # 'self' covers same-origin sockets in current browsers; older ones need them spelled out.
    sockets = f" ws://{host} wss://{host}" if _HOST_RE.match(host) else ""
    return ("default-src 'self'; script-src 'self'; style-src 'self'; "
            f"img-src {img}; connect-src 'self'{sockets}; "
            "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")


class GallerySessionInterface(SecureCookieSessionInterface):
    """Flask's signed-cookie sessions, with ``Secure`` set whenever the request came over
    HTTPS (``request.is_secure``; behind a proxy see ``NOVA_WEB_PROXY_HOPS``) or
    ``SESSION_COOKIE_SECURE`` is on."""

    def get_cookie_secure(self, app: Flask) -> bool:
        return bool(app.config["SESSION_COOKIE_SECURE"]) or (
            has_request_context() and request.is_secure)


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
    """Install the host check, the headers hook, the session cookie policy and the
    ``csrf_token`` / ``next_path`` template globals."""
    app.session_interface = GallerySessionInterface()
    app.before_request(check_host)
    app.after_request(add_security_headers)
    app.jinja_env.globals.update(csrf_token=csrf_token, next_path=next_path,
                                 CSRF_FIELD=CSRF_FIELD)


def check_origin() -> bool:
    """Whether the current request's Origin may open a WebSocket here."""
    allowed = current_app.config.get("NOVA_WEB_ALLOWED_ORIGINS", ())
    return origin_allowed(request.headers.get("Origin"), request.host, allowed)
