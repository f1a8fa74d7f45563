"""``nova-queue doctor``: checks a namespace's invariants and, asked to, repairs what can be
repaired without losing a committed result.

The checks (``doctor_checks``) read the namespace with plain commands, which on a live pool
race with the scripts; so every finding a repair could fix is confirmed by the ``repair``
script in its check mode, atomically, and reported only if it still holds. ``--repair``
runs the same script in its fix mode: tasks go back where their state says (a task found
in no set is requeued, a lease in no lease set is listed again, a lease held by a worker
Redis does not know falls due and the reaper requeues it), counts are recounted from the
tasks' states (a job whose tasks are all terminal finishes), index entries are added or
dropped, scripts are loaded. No task's state or result is written. Then it checks again:
the report is what remains.

It reads every key of the namespace (``SCAN``): O(keys); 5.7 s for 100,000 tasks on a
2-core VM.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

import redis
from redis.cluster import RedisCluster

from nova_queue import errors, protocol
from nova_queue.doctor_checks import (
    Finding,
    check_inflight,
    check_jobs,
    check_members,
    check_orphans,
    check_protocol,
    check_scripts,
    check_settings,
    check_workers,
)
from nova_queue.doctor_scan import scan_keys

__all__ = ["Finding", "Report", "diagnose", "repair", "run"]


@dataclasses.dataclass
class Report:
    """What the doctor found in one namespace (and, with --repair, what it did first)."""

    namespace: str
    findings: list[Finding] = dataclasses.field(default_factory=list)
    checked: dict[str, int] = dataclasses.field(default_factory=dict)
    repaired: list[str] = dataclasses.field(default_factory=list)

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "problem"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity != "problem"]

    @property
    def ok(self) -> bool:
        """No problem (warnings do not break a guarantee)."""
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "ok": self.ok, "protocol": protocol.PROTOCOL,
                "checked": self.checked, "repaired": self.repaired,
                "problems": [f.to_json() for f in self.problems],
                "warnings": [f.to_json() for f in self.warnings]}


def _repair_keys(client: Any) -> list[str]:
    k = client.keys
    return [k.leases(), k.inflight(), k.failed(), k.finished(), k.jobs(), k.staging(),
            k.expiring(), k.departed(), k.alive(), k.workers(), k.meta(), k.events()]


def _op(client: Any, op: tuple[str, ...], mode: str) -> str:
    """Run one repair op (``mode`` check or fix); what it did or would do ('' if nothing)."""
    if op[0] == "load-scripts":
        if mode == "fix":
            client.scripts.load(client.redis)
        return "loaded the scripts"
    head = [client.prefix, client.settings.events_maxlen, mode]
    if op[0] != "recount":
        return str(client.caller.run("repair", _repair_keys(client), [*head, *op])[1])
    nxt, counts = 0, [0, 0, 0, 0, 0]
    while True:  # a job of more than 2,000 tasks is counted in several calls
        res = client.caller.run("repair", _repair_keys(client), [*head, *op, nxt, *counts])
        nxt, counts = int(res[2]), [int(c) for c in res[3:8]]
        if nxt < 0:
            return str(res[1])


def _confirm(client: Any, found: list[Finding]) -> list[Finding]:
    """The findings that hold when the repair script looks (check mode, atomically), each
    with what --repair would do; findings without a repair pass as they are."""
    out: list[Finding] = []
    simple = [f for f in found if f.repair and f.repair[0] not in ("recount", "load-scripts")]
    whats: dict[int, str] = {}
    keys, head = _repair_keys(client), [client.prefix, client.settings.events_maxlen, "check"]
    # one call on its own loads the script; redis-py's cluster client pipelines no EVALSHA
    alone = simple if isinstance(client.redis, RedisCluster) else simple[:1]
    for f in alone:
        whats[id(f)] = _op(client, f.repair or (), "check")
    simple = simple[len(alone):]
    for lo in range(0, len(simple), 500):
        pipe = client.redis.pipeline(transaction=False)
        for f in simple[lo:lo + 500]:
            client.scripts.queue(pipe, "repair", keys, [*head, *f.repair])
        for f, res in zip(simple[lo:lo + 500], pipe.execute()):
            whats[id(f)] = str(res[1])
    for f in found:
        if not f.repair:
            out.append(f)
            continue
        what = whats[id(f)] if id(f) in whats else _op(client, f.repair, "check")
        if what:
            out.append(dataclasses.replace(f, message=f"{f.message} (--repair: {what})"))
    return out


def diagnose(client: Any) -> Report:
    """Check the namespace of ``client`` (a NovaClient); nothing is written."""
    r, k = client.redis, client.keys
    report = Report(k.namespace)
    report.findings += check_protocol(r, k)
    if any(f.severity == "problem" for f in report.findings):
        return report  # another protocol: this release cannot judge its data
    report.findings += check_settings(r)
    report.findings += _confirm(client, list(check_scripts(r, client.scripts.shas())))
    scan = scan_keys(r, k)
    leased: Counter[str] = Counter()
    found = list(check_jobs(r, k, scan, leased))
    found += check_members(r, k, scan)
    found += check_workers(r, k, scan)
    found += check_inflight(r, k, leased)
    report.findings += _confirm(client, found)
    report.findings += check_orphans(k, scan)
    report.checked = {"keys": scan.keys, "jobs": len(scan.jobs),
                      "tasks": sum(scan.task_keys.values()), "workers": len(scan.workers)}
    return report


def repair(client: Any, report: Report) -> list[str]:
    """Fix every repairable finding of ``report``; returns what was done, one line each.
    Placements first, then counts (which follow the tasks), then a reap, so that a lease
    that fell due is requeued now."""
    done: list[str] = []
    order = {"task": 0, "member": 0, "job": 1, "worker": 1, "recount": 2, "inflight": 3}
    todo = sorted((f for f in report.findings if f.repair),
                  key=lambda f: order.get(f.repair[0], 4))  # type: ignore[index]
    for f in todo:
        assert f.repair is not None
        what = _op(client, f.repair, "fix")
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


def run(client: Any, *, fix: bool = False) -> Report:
    """Check; with ``fix``, repair and check again (the report then says what was done)."""
    report = diagnose(client)
    if not fix or not any(f.repair for f in report.findings):
        return report
    done = repair(client, report)
    after = diagnose(client)
    after.repaired = done
    return after
