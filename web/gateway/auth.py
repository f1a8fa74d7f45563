"""Who is calling: the ``Authorization: Bearer <token>`` of every request, looked up by its
SHA-256 (:mod:`nova_queue.tokens`), bound to the worker id the gateway gave the token, and
counted against the token's rate limit (a fixed window in Redis, so every gateway of a
pool shares it). The token is never logged; errors name the token's name at most.

One Redis round trip per request (:data:`AUTH_LUA`): the token's hash, the count of its
window (only for a token that exists, so unknown tokens leave no keys), its
``last_used_ms`` (at most every :data:`LAST_USED_EVERY_MS`, and only on a hash that exists:
a revoke is never undone) and, for a commit, the lease holder fields of its task, read
atomically; a revoked token is unknown from the next request on."""

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
#: The task fields that say who holds a lease (primary and backup); read with a commit.
HOLDER_FIELDS = ("state", "worker", "lease_gen", "attempt_id", "b_worker", "b_lease_gen",
                 "b_attempt_id")

#: KEYS[1] the token hash, KEYS[2] its rate window, KEYS[3] (optional) a task hash;
#: ARGV[1] the window's TTL (s), ARGV[2] now (ms), ARGV[3] LAST_USED_EVERY_MS, ARGV[4..]
#: the task fields to read. Returns {} for an unknown token, else {the hash as a flat
#: list, the window's count, the task's fields or {}}. No loops: a fixed set of commands.
AUTH_LUA = """
local name_last = redis.call('HMGET', KEYS[1], 'name', 'last_used_ms')
if not name_last[1] then return {} end
local count = redis.call('INCR', KEYS[2])
if count == 1 then redis.call('EXPIRE', KEYS[2], tonumber(ARGV[1])) end
local now = tonumber(ARGV[2])
if now - (tonumber(name_last[2]) or 0) > tonumber(ARGV[3]) then
  redis.call('HSET', KEYS[1], 'last_used_ms', ARGV[2])
end
local task = {}
if #KEYS > 2 then task = redis.call('HMGET', KEYS[3], unpack(ARGV, 4)) end
return {redis.call('HGETALL', KEYS[1]), count, task}
"""


class RateLimited(NovaError):
    """The token made more requests than ``NOVA_GATEWAY_RATE_PER_MIN`` in this window."""

    def __init__(self, retry_after_s: int):
        self.retry_after_s = retry_after_s
        super().__init__(f"rate limit reached; retry in {retry_after_s} s")


@dataclasses.dataclass(frozen=True)
class Caller:
    """The token behind a request, the worker id it acts as and, for a commit, the holder
    fields of the lease's task (read with the token, :data:`HOLDER_FIELDS`)."""

    token: tokens.TokenRecord
    task: dict[str, str | None] = dataclasses.field(default_factory=dict)
    #: the task ``task`` is of (None: none was read)
    task_id: str | None = None

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


def authenticate(*, need_worker: bool = True, task_id: str | None = None) -> Caller:
    """The caller of this request: its token checked (401), its rate counted (429) and,
    with ``need_worker``, the worker id it acts as (the ``X-Nova-Worker`` header, when sent,
    must be it: an older process of a token that a newer one took over is refused). With
    ``task_id``, the task's holder fields come in the same round trip."""
    state = current_app.extensions["nova_gateway"]
    record, count, task = _lookup(state, bearer(), task_id)
    if count > state.settings.gateway_rate_per_min:
        now = time.time()
        raise RateLimited(max(1, int((now // RATE_WINDOW_S + 1) * RATE_WINDOW_S - now) + 1))
    if need_worker:
        if not record.worker:
            raise AccessDeniedError("no worker joined with this token yet: send hello first")
        sent = request.headers.get("X-Nova-Worker", "")
        if sent and sent != record.worker:
            raise AccessDeniedError(f"token {record.name!r} now serves another worker process "
                                    "(one token per worker process)")
    return Caller(record, task, task_id)


def _lookup(state, token: str, task_id: str | None
            ) -> tuple[tokens.TokenRecord, int, dict[str, str | None]]:
    """(the token's record, its window's count, the task's holder fields): one script."""
    token_digest = tokens.digest(token)
    now = time.time()
    keys = state.client.keys
    script_keys = [keys.token(token_digest),
                   keys.gateway_rate(token_digest, int(now // RATE_WINDOW_S))]
    if task_id is not None:
        script_keys.append(keys.task(task_id))
    reply = state.auth_script(keys=script_keys, args=[
        2 * RATE_WINDOW_S, int(now * 1000), LAST_USED_EVERY_MS, *HOLDER_FIELDS])
    if not reply:
        raise TokenError("unknown or revoked worker token")
    flat, count, task = reply
    record = tokens.TokenRecord.from_hash(token_digest, dict(zip(flat[::2], flat[1::2])))
    return record, int(count), dict(zip(HOLDER_FIELDS, task)) if task_id is not None else {}


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
