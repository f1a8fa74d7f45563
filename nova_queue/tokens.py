"""Gateway worker tokens: ``nova-queue tokens create / list / revoke``.

A token is a random secret (``secrets.token_urlsafe``) shown once at creation; Redis keeps
only its SHA-256 (``token:<digest>``, and ``tokens``: name -> digest), so a copy of Redis
does not give anyone a worker login. The gateway (``web/gateway``) finds a request's
token by hashing the ``Authorization: Bearer`` value. A token carries what its worker may
do: the apps it may serve (empty: any), labels its worker's labels are pinned to, its trust
and its owner (who runs the machine: a worker that is not trusted never verifies a result
made under a token of its own owner, docs/SECURITY.md).

Revoking deletes the token's keys, then deregisters the worker the gateway gave it, so that
worker's leases return to the queue at once without using an attempt (``deregister-9``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import secrets
from collections.abc import Iterable, Mapping

from nova_queue.errors import InputError
from nova_queue.jobspec import NAME_RE
from nova_queue.keys import APP_NAME_RE, WORKER_ID_RE
from nova_queue.settings import TRUST_LEVELS
from nova_queue.terms import parse_price, price_field

#: Token names: part of the worker ids the gateway gives (``<name>.<12 hex>``).
TOKEN_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}\Z")
#: Apps one token may list.
MAX_TOKEN_APPS = 64


def digest(token: str) -> str:
    """The SHA-256 (hex) of a token: what Redis stores and the gateway looks up."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclasses.dataclass(frozen=True)
class TokenRecord:
    """One token as stored (never the token itself)."""

    name: str
    digest: str
    apps: tuple[str, ...]
    labels: Mapping[str, str]
    created_ms: int
    last_used_ms: int | None
    #: the worker id the gateway gave the token's current process ("" before the first)
    worker: str
    #: the apps that process registered
    registered: tuple[str, ...]
    #: what its workers register as: ``new`` (their results are verified until they earn
    #: trust) or ``trusted`` (the operator vouches for them)
    trust: str = "new"
    #: who runs the token's machine (the operator says; default the token's name): a worker
    #: that is not trusted never verifies a result of a worker of the same owner
    owner: str = ""
    #: what an hour of its worker costs (dollars), set by the operator: the worker's ``price``
    cost_per_hour: float = 0.0

    @classmethod
    def from_hash(cls, token_digest: str, h: Mapping[str, str]) -> TokenRecord:
        labels = json.loads(h.get("labels") or "{}")
        return cls(
            name=h.get("name", ""), digest=token_digest,
            apps=tuple(a for a in h.get("apps", "").split(",") if a),
            labels={str(k): str(v) for k, v in labels.items()},
            created_ms=int(h.get("created_ms") or 0),
            last_used_ms=int(h["last_used_ms"]) if h.get("last_used_ms") else None,
            worker=h.get("worker", ""),
            registered=tuple(a for a in h.get("registered", "").split(",") if a),
            trust="trusted" if h.get("trust") == "trusted" else "new",
            owner=h.get("owner") or h.get("name", ""),
            cost_per_hour=price_field(h.get("cost_per_hour")))

    def allows_app(self, app: str) -> bool:
        """Whether the token lets its worker serve ``app``."""
        return not self.apps or app in self.apps

    def to_json(self) -> dict[str, object]:
        """The ``tokens list --json`` shape (no digest: it is as good as nothing to a reader,
        but there is no reason to show it)."""
        return {"name": self.name, "apps": list(self.apps), "labels": dict(self.labels),
                "created_ms": self.created_ms, "last_used_ms": self.last_used_ms,
                "worker": self.worker or None, "trust": self.trust, "owner": self.owner,
                "cost_per_hour": self.cost_per_hour}


def check_name(name: str) -> str:
    """``name`` if it is a valid token name, else InputError."""
    if not isinstance(name, str) or not TOKEN_NAME_RE.match(name):
        raise InputError(f"invalid token name {name!r}: use 1 to 64 letters, digits, '_', "
                         "'.' or '-'")
    return name


def _check_apps(apps: Iterable[str]) -> list[str]:
    out = list(dict.fromkeys(apps))
    for app in out:
        if not isinstance(app, str) or not APP_NAME_RE.match(app):
            raise InputError(f"invalid app name {app!r}")
    if len(out) > MAX_TOKEN_APPS:
        raise InputError(f"a token lists at most {MAX_TOKEN_APPS} apps")
    return out


def create(client, name: str, *, apps: Iterable[str] = (),
           labels: Mapping[str, str] | None = None, trust: str = "new",
           owner: str | None = None, cost_per_hour: float = 0.0) -> str:
    """Create token ``name`` (``client``: a NovaClient) and return the token, the only time
    it is seen. ``trust``: ``new`` (its workers' results are verified until they earn trust)
    or ``trusted``; ``owner``: who runs its machine (default ``name``: give the tokens of
    one person's machines one owner, so that they never verify each other);
    ``cost_per_hour``: its worker's price in dollars. InputError if the name is taken
    (revoke it first)."""
    check_name(name)
    if trust not in TRUST_LEVELS:
        raise InputError(f"trust must be one of {', '.join(TRUST_LEVELS)}, not {trust!r}")
    owner = name if owner is None else owner
    if not isinstance(owner, str) or not NAME_RE.match(owner):
        raise InputError(f"invalid owner {owner!r}: use 1 to 128 of A-Z a-z 0-9 _ . : @ + / -")
    app_list = _check_apps(apps)
    price = parse_price(cost_per_hour)
    token = secrets.token_urlsafe(32)
    token_digest = digest(token)
    keys = client.keys
    if not client.redis.hsetnx(keys.tokens(), name, token_digest):
        raise InputError(f"token {name!r} exists; revoke it first ('nova-queue tokens revoke "
                         f"{name}')")
    client.redis.hset(keys.token(token_digest), mapping={
        "name": name, "apps": ",".join(app_list),
        "labels": json.dumps(dict(labels or {}), sort_keys=True),
        "created_ms": client.server_time_ms(), "trust": trust, "owner": owner,
        "cost_per_hour": repr(price)})
    return token


def lookup(r, keys, token: str) -> TokenRecord | None:
    """The record of ``token`` (a Bearer value), or None for an unknown or revoked one."""
    token_digest = digest(token)
    h = r.hgetall(keys.token(token_digest))
    return TokenRecord.from_hash(token_digest, h) if h.get("name") else None


def list_tokens(client) -> list[TokenRecord]:
    """Every token, by name."""
    keys = client.keys
    names = client.redis.hgetall(keys.tokens())
    pipe = client.redis.pipeline(transaction=False)
    for token_digest in names.values():
        pipe.hgetall(keys.token(token_digest))
    records = [TokenRecord.from_hash(d, h) for d, h in zip(names.values(), pipe.execute()) if h]
    return sorted(records, key=lambda t: t.name)


def revoke(client, name: str) -> tuple[str, int]:
    """Revoke token ``name``: its keys go, then its worker is deregistered (its leases
    return to the queue without using an attempt). Returns ``(worker id or "", leases
    released)``; InputError for an unknown name."""
    check_name(name)
    keys = client.keys
    token_digest = client.redis.hget(keys.tokens(), name)
    if not token_digest:
        raise InputError(f"no token named {name!r} ('nova-queue tokens list' shows them)")
    worker = client.redis.hget(keys.token(token_digest), "worker") or ""
    pipe = client.redis.pipeline(transaction=True)
    pipe.delete(keys.token(token_digest))
    pipe.hdel(keys.tokens(), name)
    pipe.execute()
    if not WORKER_ID_RE.match(worker):  # none, or a field forged by hand: no worker of ours
        return "", 0
    return worker, client.deregister_worker(worker)
