"""The doctor's confirmations and repairs: every finding a repair could fix is confirmed by
the ``repair`` script (``lua/repair-12.lua``) in its check mode, atomically, and reported
only if it still holds; ``--repair`` runs the same script in its fix mode. Scripts run
through the client's caller (:class:`~nova_queue.client.caller.Caller`)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import redis
from redis.cluster import RedisCluster

from nova_queue import errors
from nova_queue.doctor.report import Finding, Report

if TYPE_CHECKING:
    from nova_queue.client import NovaClient

#: Findings confirmed per pipeline round trip.
CONFIRM_BATCH = 500


def repair_keys(client: NovaClient) -> list[str]:
    """repair-12's KEYS."""
    k = client.keys
    return [k.leases(), k.inflight(), k.failed(), k.finished(), k.jobs(), k.staging(),
            k.expiring(), k.departed(), k.alive(), k.workers(), k.meta(), k.events()]


def run_op(client: NovaClient, op: tuple[str, ...], mode: str) -> str:
    """Run one repair op (``mode`` check or fix); what it did or would do ('' if nothing)."""
    if op[0] == "load-scripts":
        if mode == "fix":
            client.scripts.load(client.redis)
        return "loaded the scripts"
    keys = repair_keys(client)
    head = [client.prefix, client.settings.events_maxlen, mode]
    if op[0] != "recount":
        return str(client.caller.run("repair", keys, [*head, *op])[1])
    nxt, counts = 0, [0, 0, 0, 0, 0]
    while True:  # a job of more than 2,000 tasks is counted in several calls
        res = client.caller.run("repair", keys, [*head, *op, nxt, *counts])
        nxt, counts = int(res[2]), [int(c) for c in res[3:8]]
        if nxt < 0:
            return str(res[1])


def confirm(client: NovaClient, found: list[Finding]) -> list[Finding]:
    """The findings that hold when the repair script looks (check mode, atomically), each
    with what --repair would do; findings without a repair pass as they are."""
    out: list[Finding] = []
    simple = [f for f in found if f.repair and f.repair[0] not in ("recount", "load-scripts")]
    whats: dict[int, str] = {}
    keys, head = repair_keys(client), [client.prefix, client.settings.events_maxlen, "check"]
    # one call on its own loads the script; redis-py's cluster client pipelines no EVALSHA
    alone = simple if isinstance(client.redis, RedisCluster) else simple[:1]
    for f in alone:
        whats[id(f)] = run_op(client, f.repair or (), "check")
    simple = simple[len(alone):]
    for lo in range(0, len(simple), CONFIRM_BATCH):
        pipe = client.redis.pipeline(transaction=False)
        for f in simple[lo:lo + CONFIRM_BATCH]:
            client.scripts.queue(pipe, "repair", keys, [*head, *(f.repair or ())])
        for f, res in zip(simple[lo:lo + CONFIRM_BATCH], pipe.execute()):
            whats[id(f)] = str(res[1])
    for f in found:
        if not f.repair:
            out.append(f)
            continue
        what = whats[id(f)] if id(f) in whats else run_op(client, f.repair, "check")
        if what:
            out.append(dataclasses.replace(f, message=f"{f.message} (--repair: {what})"))
    return out


def repair(client: NovaClient, report: Report) -> list[str]:
    """Fix every repairable finding of ``report``; returns what was done, one line each.
    Placements first, then counts (which follow the tasks), then a reap, so that a lease
    that fell due is requeued now."""
    done: list[str] = []
    order = {"task": 0, "member": 0, "job": 1, "worker": 1, "recount": 2, "inflight": 3}
    todo = sorted((f for f in report.findings if f.repair),
                  key=lambda f: order.get(f.repair[0], 4))  # type: ignore[index]
    for f in todo:
        assert f.repair is not None
        what = run_op(client, f.repair, "fix")
        if what:
            done.append(f"{_target(f.repair)}: {what}")
    if any(f.repair and f.repair[0] == "task" for f in todo):
        try:
            client.reap()
        except (redis.RedisError, errors.NovaError):
            pass  # the next claim reaps too
    return done


def _target(op: tuple[str, ...]) -> str:
    """What a repair op fixes, in words."""
    if op[0] == "member":
        return f"{op[1]}{':' + op[2] if op[2] else ''} member {op[3]!r}"
    names = {"task": "task", "job": "job", "worker": "worker", "recount": "the counts of job",
             "inflight": "inflight of app"}
    return "the scripts" if op[0] == "load-scripts" else f"{names[op[0]]} {op[1]}"
