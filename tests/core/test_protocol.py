"""The protocol version: a namespace records it, every script that can check it refuses a
namespace of another version before writing anything, and readers refuse it too.

The releases themselves (an earlier commit's code, a next release of protocol 4) run
against this one in ``tests/e2e/test_version_skew.py``.
"""

from __future__ import annotations

import pytest
from novatests.leases import join, rkey, setup_job

from nova_queue import protocol
from nova_queue.errors import ConfigError, ProtocolMismatchError, protocol_error
from nova_queue.scripts import script_sources


def snapshot(nova) -> dict[str, object]:
    """Every key of the namespace with its content (what a refused call must not change)."""
    r = nova.redis
    out: dict[str, object] = {}
    for key in sorted(r.scan_iter(match=nova.prefix + "*", count=1000)):
        kind = r.type(key)
        out[key] = (r.hgetall(key) if kind == "hash" else r.zrange(key, 0, -1, withscores=True)
                    if kind == "zset" else sorted(r.smembers(key)) if kind == "set"
                    else r.xlen(key) if kind == "stream" else r.get(key))
    return out


def test_the_first_script_records_the_protocol(nova):
    assert protocol.recorded(nova.redis, nova.keys) is None
    setup_job(nova, 1)
    assert nova.redis.hget(nova.keys.meta(), "protocol") == str(protocol.PROTOCOL) == "3"
    join(nova, "w")  # the same version: accepted, and the worker records its own
    assert nova.redis.hget(nova.keys.worker("w"), "protocol") == "3"
    protocol.check(nova.redis, nova.keys)


def test_every_script_carries_the_version_folded_in():
    sources = script_sources()
    unchecked = {"complete", "fail"}  # fenced by a lease only a checked claim hands out
    for name, (_, source) in sources.items():
        if name in unchecked:
            assert "check_protocol" not in source, name
            continue
        assert f"({protocol.PROTOCOL} --[[PROTOCOL.VERSION]])" in source, name
        assert "local function check_protocol(" in source, name


@pytest.mark.parametrize("recorded", ["4", "2", "two"])
def test_scripts_refuse_another_protocol_before_writing(nova, recorded):
    job = setup_job(nova, 3)
    join(nova, "w")
    [lease] = nova.claim("w", "synthetic").leases
    nova.redis.hset(nova.keys.task(f"{job}:2"), "state", "failed")  # for retry
    nova.redis.hset(nova.keys.meta(), "protocol", recorded)
    before = snapshot(nova)
    calls = {
        "enqueue": lambda: setup_job(nova, 1),
        "register": lambda: join(nova, "w2"),
        "claim": lambda: nova.claim("w", "synthetic"),
        "renew": lambda: nova.renew("w", [lease]),
        "reap": lambda: nova.reap(),
        "cancel": lambda: nova.cancel(job),
        "retry": lambda: nova.retry(f"{job}:2"),
        "deregister": lambda: nova.deregister_worker("w"),
        "complete_claim": lambda: nova.complete_and_claim("w", lease, rkey(lease), run_s=0.1,
                                                          warm=True),
    }
    for name, call in calls.items():
        if name == "complete_claim":
            continue  # commits first, then its claim refuses: below
        with pytest.raises(ProtocolMismatchError) as info:
            call()
        message = str(info.value)
        assert f"speaks protocol {recorded}" in message and "speaks protocol 3" in message, name
        assert "\n" not in message and nova.keys.namespace in message
        assert isinstance(info.value, ConfigError)
        assert snapshot(nova) == before, f"{name} wrote before refusing"
    # complete_claim: the commit (fenced by a lease a checked claim gave) holds, the claim
    # after it refuses
    with pytest.raises(ProtocolMismatchError):
        calls["complete_claim"]()
    assert nova.task(lease.task_id).state == "done"


def test_the_message_says_what_to_upgrade(nova):
    newer = str(ProtocolMismatchError("ns", "3", 2))
    assert newer.startswith("namespace 'ns' speaks protocol 3 but this nova-queue ")
    assert newer.endswith("speaks protocol 2: upgrade nova-queue here to a release that speaks "
                          "protocol 3")
    older = str(ProtocolMismatchError("ns", "1", 2))
    assert "run a release that speaks protocol 1 here" in older and "new namespace" in older
    forged = str(ProtocolMismatchError("ns", "\x1b[2J" + "9" * 40, 2))
    assert "\x1b" not in forged and len(forged) < 300


def test_error_replies_map_to_the_exception_and_nothing_else():
    got = protocol_error(Exception("PROTOCOL_MISMATCH 3 2"), "ns")
    assert isinstance(got, ProtocolMismatchError) and (got.theirs, got.ours) == ("3", 2)
    for other in ("WRONGTYPE Operation against a key", "PROTOCOL_MISMATCH", "PROTOCOL_MISMATCH 3 x",
                  "ERR PROTOCOL_MISMATCH 3 2"):
        assert protocol_error(Exception(other), "ns") is None


def test_readers_check_the_recorded_version(nova):
    protocol.check(nova.redis, nova.keys)  # nothing recorded: fine
    nova.redis.hset(nova.keys.meta(), "protocol", "4")
    with pytest.raises(ProtocolMismatchError, match="speaks protocol 4"):
        protocol.check(nova.redis, nova.keys)
    nova.redis.hset(nova.keys.meta(), "protocol", "3")
    protocol.check(nova.redis, nova.keys)
