"""Who is calling: the ``Authorization: Bearer <token>`` of every request, looked up by its
SHA-256 (:mod:`nova_queue.tokens`), bound to the worker id the gateway gave the token, and
counted against the token's rate limit (a fixed window in Redis, so every gateway of a
pool shares it). The token is never logged; errors name the token's name at most."""

from __future__ import annotations

import dataclasses
import time

import redis
from flask import current_app, request

from nova_queue import tokens
from nova_queue.errors import AccessDeniedError, NovaError, TokenError

#: The rate limit's window.
RATE_WINDOW_S = 60
#: ``last_used_ms`` is written at most this often per token.
LAST_USED_EVERY_MS = 30_000


class RateLimited(NovaError):
    """The token made more requests than ``NOVA_GATEWAY_RATE_PER_MIN`` in this window."""

    def __init__(self, retry_after_s: int):
        self.retry_after_s = retry_after_s
        super().__init__(f"rate limit reached; retry in {retry_after_s} s")


@dataclasses.dataclass(frozen=True)
class Caller:
    """The token behind a request and the worker id it acts as."""

    token: tokens.TokenRecord

    @property
    def worker_id(self) -> str:
        return self.token.worker


def bearer() -> str:
    """The request's Bearer token, or TokenError."""
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        raise TokenError("missing worker token: send 'Authorization: Bearer <token>'")
    return value.strip()


def authenticate(*, need_worker: bool = True) -> Caller:
    """The caller of this request: its token checked (401), its rate counted (429) and,
    with ``need_worker``, the worker id it acts as (the ``X-Nova-Worker`` header, when sent,
    must be it: an older process of a token that a newer one took over is refused)."""
    state = current_app.extensions["nova_gateway"]
    record = tokens.lookup(state.client.redis, state.client.keys, bearer())
    if record is None:
        raise TokenError("unknown or revoked worker token")
    _count(state, record)
    if need_worker:
        if not record.worker:
            raise AccessDeniedError("no worker joined with this token yet: send hello first")
        sent = request.headers.get("X-Nova-Worker", "")
        if sent and sent != record.worker:
            raise AccessDeniedError(f"token {record.name!r} now serves another worker process "
                                    "(one token per worker process)")
    return Caller(record)


def _count(state, record: tokens.TokenRecord) -> None:
    """One request against the token's window; RateLimited past the limit."""
    now = time.time()
    window = int(now // RATE_WINDOW_S)
    key = state.client.keys.gateway_rate(record.digest, window)
    pipe = state.client.redis.pipeline(transaction=False)
    pipe.incr(key)
    pipe.expire(key, 2 * RATE_WINDOW_S)
    count = int(pipe.execute()[0])
    now_ms = int(now * 1000)
    if record.last_used_ms is None or now_ms - record.last_used_ms > LAST_USED_EVERY_MS:
        set_if_exists(state.client.redis, state.client.keys.token(record.digest),
                      {"last_used_ms": now_ms})
    if count > state.settings.gateway_rate_per_min:
        raise RateLimited(max(1, int((window + 1) * RATE_WINDOW_S - now) + 1))


def set_if_exists(r: redis.Redis, key: str, fields: dict) -> bool:
    """HSET ``fields`` on the token hash ``key`` unless it was revoked meanwhile (an HSET
    alone would bring back a stub of a deleted token)."""
    with r.pipeline(transaction=True) as pipe:
        try:
            pipe.watch(key)
            if not pipe.hexists(key, "name"):
                pipe.reset()
                return False
            pipe.multi()
            pipe.hset(key, mapping=fields)
            pipe.execute()
            return True
        except redis.WatchError:
            return False
