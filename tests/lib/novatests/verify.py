"""Helpers of the verification tests (tests/core/test_verification*.py): workers that are
not trusted, verifiers, and results held or standing unverified, driven through the real
scripts."""

from __future__ import annotations

import pytest

from nova_queue.keys import ident_of
from novatests.leases import commit, join, rkey, setup_job

AGREE = {"verify": {"cand": "agree"}}
MISMATCH = {"verify": {"cand": "mismatch"}}
#: the scripts' TRUST_AFTER (common.lua)
TRUST_AFTER = 20


def new_worker(nova, wid: str, **fields) -> None:
    """A worker that is not trusted (a gateway token's, or NOVA_TRUST=new)."""
    join(nova, wid, trust="new", **fields)


def verifier(nova, wid: str, trust: str = "trusted") -> None:
    """A worker that re-runs others' results (a direct worker)."""
    join(nova, wid, trust=trust, verifier="1")


def record(nova, wid: str) -> dict[str, str]:
    return nova.redis.hgetall(nova.keys.trust(ident_of(wid)))


def held_one(nova, wid: str):
    """Claim and commit one task as ``wid``; its lease (the commit was held: a new worker's
    first result is always sampled)."""
    [lease] = nova.claim(wid, "synthetic").leases
    assert commit(nova, wid, lease).job_finished is False
    return lease


def unsampled_commit(nova, wid: str):
    """A job of one task whose result ``wid`` committed unverified (sampled ones are agreed
    with until one is not): (job id, its lease)."""
    for _ in range(50):
        nova.redis.hset(nova.keys.trust(ident_of(wid)), "streak", 10**6)  # VERIFY_FLOOR
        job = setup_job(nova, 1)
        [lease] = nova.claim(wid, "synthetic").leases
        if commit(nova, wid, lease).job_finished:
            return job, lease
        [check] = nova.claim("direct", "synthetic").leases
        nova.complete("direct", check, rkey(check), run_s=0.1, warm=True, meta=AGREE)
        # that agreement, on top of the streak faked above, earned trust: take it back, so
        # that the caller's next results are sampled as a new worker's
        nova.redis.hset(nova.keys.trust(ident_of(wid)), "level", "new")
        nova.redis.hset(nova.keys.worker(wid), "trust", "new")
    pytest.fail("50 results in a row were sampled at VERIFY_FLOOR")


def waited_long(nova, tid: str) -> None:
    """As if ``tid`` had awaited verification past VERIFY_ORPHAN_MS."""
    nova.redis.zadd(nova.keys.verify("synthetic"), {tid: 0})


def untrusted_check(nova):
    """A one-task job whose result "tok.aaaaaaaaaaaa" (new) committed and that waited past
    VERIFY_WAIT_MS, and its verification leased by "other.bbbbbbbbbbbb", a verifier that is
    not trusted either: (the maker's lease, the verifier's)."""
    setup_job(nova, 1)
    new_worker(nova, "tok.aaaaaaaaaaaa")
    join(nova, "other.bbbbbbbbbbbb", trust="new", verifier="1")
    lease = held_one(nova, "tok.aaaaaaaaaaaa")
    nova.redis.hset(nova.keys.task(lease.task_id), "v_since_ms", nova.server_time_ms() - 60_000)
    [second] = nova.claim("other.bbbbbbbbbbbb", "synthetic").leases
    return lease, second
