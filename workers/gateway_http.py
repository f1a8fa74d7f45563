"""HTTP to a gateway, for the worker's link (``link.py``): one keep-alive session per
thread, the token in its ``Authorization`` header only (never logged), connection errors
and 429 answers retried inside one call (every call is idempotent), and the gateway's
answers turned back into the errors a direct worker sees: an unreachable gateway
(connection refused or reset, a timeout, a 5xx) is :class:`GatewayUnreachable`, a
:class:`redis.ConnectionError`, so every retry path of the direct worker applies; a
rejected commit is a StaleResultError; a 401 (token unknown or revoked) a TokenError.
TLS certificates are always verified (``NOVA_GATEWAY_CA_BUNDLE`` names a private CA).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import redis
import requests

from nova_queue import __version__, errors
from nova_queue.settings import Settings

log = logging.getLogger(__name__)

#: Connection errors retried inside one call (every call is idempotent), and the pause.
CONNECT_RETRIES = 2
CONNECT_RETRY_S = 0.25
#: 429 answers waited out inside one call before it counts as unreachable.
RATE_RETRIES = 5
MAX_RETRY_AFTER_S = 30.0


class GatewayUnreachable(redis.ConnectionError):
    """The gateway cannot be reached or cannot reach Redis: the state store is unavailable
    to this worker, as a Redis outage is to a direct one (so the same retry paths apply)."""


#: error kinds the gateway answers -> what the worker raises
_KINDS: dict[str, type[Exception]] = {
    "token": errors.TokenError, "denied": errors.AccessDeniedError,
    "stale": errors.StaleResultError, "worker_lost": errors.WorkerLostError,
    "input": errors.InputError, "not_found": errors.TaskNotFoundError,
    "too_large": errors.ResultTooLargeError, "exists": errors.ObjectExistsError,
    "store": errors.StoreError, "protocol": errors.ConfigError,
}


class GatewayHTTP:
    """Requests to the gateway at ``url``. Thread-safe: one session per thread, made by
    ``new_session``."""

    def __init__(self, url: str, settings: Settings):
        self.url = url
        self.settings = settings
        self._token = settings.worker_token
        self._verify: str | bool = settings.gateway_ca_bundle or True
        self._local = threading.local()
        self.new_session: Callable[[], Any] = requests.Session
        #: the worker id the gateway gave this process, sent with every call once known
        self.worker_id = ""

    def session(self) -> Any:
        """This thread's session, with the token and this release in its headers."""
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = self.new_session()
            session.headers["Authorization"] = f"Bearer {self._token}"
            session.headers["User-Agent"] = f"nova-queue-worker/{__version__}"
        return session

    def post(self, path: str, body: Mapping[str, Any] | None = None, *,
             extra_s: float = 0.0, headers: Mapping[str, str] | None = None,
             **kwargs: Any) -> dict[str, Any]:
        """POST ``body`` as JSON (or ``kwargs``: a raw ``data`` body with its ``headers``);
        the JSON answer, or the error the gateway's answer names."""
        return _answer(self._send(path, body, extra_s, headers, **kwargs))

    def fetch(self, path: str, body: Mapping[str, Any]) -> bytes:
        """POST ``body`` as JSON; the answer's bytes (2xx), or the error it names."""
        resp = self._send(path, body, 0.0, None)
        if 200 <= resp.status_code < 300:
            return resp.content
        _answer(resp)
        raise errors.NovaError(f"gateway answered {resp.status_code}")  # _answer raised

    def _send(self, path: str, body: Mapping[str, Any] | None, extra_s: float,
              headers: Mapping[str, str] | None, **kwargs: Any) -> requests.Response:
        """The gateway's answer to one POST: connection failures retried CONNECT_RETRIES
        times, 429 waited out RATE_RETRIES times."""
        headers = {**({"X-Nova-Worker": self.worker_id} if self.worker_id else {}),
                   **(headers or {})}
        timeout = (min(10.0, self.settings.gateway_timeout_s),
                   self.settings.gateway_timeout_s + extra_s)
        connect_tries = rate_tries = 0
        while True:
            try:
                resp = self.session().post(self.url + path, json=body, headers=headers,
                                           timeout=timeout, verify=self._verify, **kwargs)
            except requests.exceptions.SSLError as exc:
                raise errors.ConfigError(f"TLS check of the gateway {self.url} failed: {exc} "
                                         "(NOVA_GATEWAY_CA_BUNDLE names a private CA)") from None
            except requests.RequestException as exc:
                connect_tries += 1
                if connect_tries > CONNECT_RETRIES:
                    raise GatewayUnreachable(f"gateway {self.url}: {type(exc).__name__}") from None
                time.sleep(CONNECT_RETRY_S * connect_tries)
                continue
            if resp.status_code == 429 and rate_tries < RATE_RETRIES:
                rate_tries += 1
                wait_s = _retry_after(resp)
                log.warning("rate-limited by the gateway; waiting %.1f s", wait_s)
                time.sleep(wait_s)
                continue
            return resp

    def close(self) -> None:
        """Close this thread's session."""
        session = getattr(self._local, "session", None)
        if session is not None:
            session.close()


def _retry_after(resp: requests.Response) -> float:
    try:
        return max(0.05, min(float(resp.headers.get("Retry-After", "1")), MAX_RETRY_AFTER_S))
    except ValueError:
        return 1.0


def _answer(resp: requests.Response) -> dict[str, Any]:
    """The JSON of a 2xx answer; else the error its ``kind`` names (5xx and 429 count as
    unreachable)."""
    try:
        body = resp.json()
    except ValueError:
        body = {}
    if 200 <= resp.status_code < 300 and isinstance(body, dict):
        return body
    message = str(body.get("error", "")) if isinstance(body, dict) else ""
    message = message or f"HTTP {resp.status_code}"
    kind = str(body.get("kind", "")) if isinstance(body, dict) else ""
    if kind == "stale":
        raise errors.StaleResultError(str(body.get("task_id", "")), message)
    if kind in _KINDS and resp.status_code < 500:
        raise _KINDS[kind](message)
    if resp.status_code == 413:
        raise errors.ResultTooLargeError(message)
    if resp.status_code == 503 and kind == "protocol":
        raise errors.ConfigError(message)
    if resp.status_code >= 500 or resp.status_code == 429:
        raise GatewayUnreachable(f"gateway answered {resp.status_code}: {message}")
    raise errors.NovaError(f"gateway answered {resp.status_code}: {message}")
