"""Is the gateway URL's scheme the one the gateway speaks? Checked when a worker joins.

Without this check a scheme mismatch is silent: a TLS handshake sent to a plain-HTTP
gateway waits for an answer that never comes (waitress waits for the end of a request
line), and a plain request to an HTTPS port is dropped or answered by the TLS proxy with
an HTML 400, so the worker retries for ever or fails with a message naming neither. Each
check concludes "mismatch" only on positive evidence, so a gateway that is merely down
is waited for as before:

- ``https://``: before joining, a plain-HTTP ``GET /v1/version`` to the same host and
  port (:func:`plain_http_gateway`); only a nova-queue gateway answers it with its JSON
  (a TLS server drops it or answers a 400 of its own). No token is sent.
- ``http://``: when joining fails, a TLS handshake with the same host and port (and 443
  when the URL names no port: :func:`speaks_tls`); a plain-HTTP server never completes one.

Each probe takes at most :data:`PROBE_TIMEOUT_S`.
"""

from __future__ import annotations

import socket
import ssl
from urllib.parse import urlsplit, urlunsplit

import requests

from nova_queue.errors import ConfigError

#: Longest one probe waits (connect, then answer).
PROBE_TIMEOUT_S = 3.0


def _host_port(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)


def plain_http_gateway(url: str) -> bool:
    """Whether a nova-queue gateway answers plain HTTP where ``url`` (https) points."""
    parts = urlsplit(url)
    host, port = _host_port(url)
    netloc = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    plain = urlunsplit(("http", netloc, parts.path.rstrip("/") + "/v1/version", "", ""))
    try:
        resp = requests.get(plain, timeout=(PROBE_TIMEOUT_S, PROBE_TIMEOUT_S),
                            allow_redirects=False)
        body = resp.json()
    except (requests.RequestException, ValueError):
        return False
    # a gateway of this release names itself; an older one answers a JSON error of its own
    return isinstance(body, dict) and (body.get("service") == "nova-queue-gateway"
                                       or {"error", "kind"} <= set(body))


def speaks_tls(host: str, port: int) -> bool:
    """Whether a TLS handshake completes at ``host:port`` (no certificate check: this only
    tells the scheme, and nothing is sent over it)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S) as raw, \
                context.wrap_socket(raw, server_hostname=host or None):
            return True
    except (OSError, ValueError):
        return False


def check_before_joining(url: str) -> None:
    """``https://`` to a plain-HTTP gateway: ConfigError, in one line."""
    if url.startswith("https://") and plain_http_gateway(url):
        plain = "http://" + url.removeprefix("https://")
        raise ConfigError(f"the gateway at {url} speaks plain HTTP, not HTTPS: use --gateway "
                          f"{plain} (only on a trusted network), or put a TLS reverse proxy in "
                          "front of it")


def check_after_failure(url: str) -> None:
    """``http://`` to an HTTPS gateway (joining failed): ConfigError, in one line. Without a
    port in the URL, port 443 is tried too (a proxy that redirects port 80 to HTTPS)."""
    if not url.startswith("http://"):
        return
    host, port = _host_port(url)
    secure = "https://" + url.removeprefix("http://")
    if speaks_tls(host, port):
        raise ConfigError(f"the gateway at {url} speaks HTTPS, not plain HTTP: use --gateway "
                          f"{secure}")
    if urlsplit(url).port is None and speaks_tls(host, 443):
        raise ConfigError(f"the gateway at {url} did not answer plain HTTP and port 443 speaks "
                          f"HTTPS: use --gateway {secure}")
