"""Start-up: wait until Redis answers, so a worker may start before its Redis.

Compose, systemd and a laptop joining over a VPN all start workers in any order. A worker
asks Redis first, before its backend self-test and benchmark: wrong credentials then fail
in a second rather than after minutes of model loading, and a benchmark is not run by a
worker that cannot join. While Redis cannot be reached it retries with backoff; only what
waiting cannot fix (credentials Redis rejects, a user without permission) stops it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import redis

from nova_queue.connection import redact_url
from nova_queue.errors import ConfigError

log = logging.getLogger(__name__)

#: First pause between attempts; each failure doubles it up to MAX_RETRY_S.
FIRST_RETRY_S = 0.5
MAX_RETRY_S = 5.0
#: Say "still waiting" at most this often.
LOG_EVERY_S = 10.0


def wait_for_redis(ping: Callable[[], object], url: str, stop: threading.Event,
                   *, clock: Callable[[], float] = time.monotonic, what: str = "Redis") -> bool:
    """Call ``ping`` until it succeeds (True) or ``stop`` is set (False).

    Connection failures and timeouts (Redis down, not yet listening, still loading its
    AOF, DNS or VPN not up yet) are retried; rejected credentials or a missing permission
    raise :class:`ConfigError` with a one-line message naming the redacted ``url``.
    ``what`` names the server in the logs (the gateway link waits the same way).
    """
    where = redact_url(url)
    started = clock()
    delay_s = FIRST_RETRY_S
    logged_at: float | None = None
    while not stop.is_set():
        try:
            ping()
        except redis.AuthenticationError as exc:  # WRONGPASS, NOAUTH, a disabled user
            raise ConfigError(f"Redis at {where} rejected the credentials: {_first_line(exc)} "
                              "(check the user and password in the Redis URL)") from None
        except redis.exceptions.NoPermissionError as exc:  # NOPERM: an ACL user too narrow
            raise ConfigError(f"Redis at {where} refused a command the worker needs: "
                              f"{_first_line(exc)} (see the worker role in docs/SECURITY.md)"
                              ) from None
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            now = clock()
            if logged_at is None:
                log.warning("waiting for %s at %s (%s); retrying with backoff",
                            what, where, _first_line(exc))
                logged_at = now
            elif now - logged_at >= LOG_EVERY_S:
                log.warning("still waiting for %s at %s after %.0f s (%s)",
                            what, where, now - started, _first_line(exc))
                logged_at = now
            stop.wait(delay_s)
            delay_s = min(delay_s * 2, MAX_RETRY_S)
            continue
        if logged_at is not None:
            log.info("%s at %s answered after %.1f s", what, where, clock() - started)
        return True
    return False


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
