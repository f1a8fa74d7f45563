"""The checks of ``nova-queue doctor``: each reads the namespace (``scan``) and yields
:class:`~nova_queue.doctor.report.Finding` s. A finding a repair can fix carries the
``repair`` script's op for it; the doctor confirms each one atomically before reporting it
(``repairs``).

The invariants: every task is in exactly the place its state says (pending: its app's
pending set; leased: the lease set and its worker's held set; failed: the failed set;
verifying: its app's verify set; no other state in any of them), and no set holds a member
that is not such a task; a job's counts equal its tasks' states, a job whose tasks are all terminal has finished, and a
finished job's state agrees with its counts (failed: not one task done; done: one at least;
a warning, since a release before the state failed finished such jobs as done); every
job and worker is in its indexes (a finished job in the retention index); inflight equals the
leased tasks per app; every key belongs to something.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

import redis

from nova_queue import protocol
from nova_queue.doctor.report import Finding
from nova_queue.doctor.scan import JOB_FIELDS, KeyScan, read_tasks
from nova_queue.keys import Keyspace
from nova_queue.models import FINISHED_STATES

#: Task states and the job counter of each (recount repairs these).
STATES = ("pending", "leased", "done", "failed", "cancelled")
#: A result awaiting verification (docs/SECURITY.md): counted, not recounted by a repair.
VERIFYING = "verifying"
TERMINAL = ("done", "failed", "cancelled")


def check_protocol(r: redis.Redis, keys: Keyspace) -> Iterator[Finding]:
    """The namespace's recorded protocol version against this release's."""
    value = protocol.recorded(r, keys)
    if value is None:
        yield Finding("protocol", "no protocol version recorded yet (the first script that "
                      "runs records it)", (keys.meta(),), "warning")
    elif value != str(protocol.PROTOCOL):
        yield Finding("protocol", f"the namespace speaks protocol {value!r}, this nova-queue "
                      f"{protocol.PROTOCOL}: run the doctor of a release that speaks it",
                      (keys.meta(),))


def check_settings(r: redis.Redis) -> Iterator[Finding]:
    """Redis settings that break guarantees: eviction, persistence."""
    try:
        policy = r.config_get("maxmemory-policy").get("maxmemory-policy", "")
        saving = r.config_get("appendonly") | r.config_get("save")
    except redis.ResponseError as exc:  # NOPERM: the admin role has no CONFIG
        yield Finding("settings", f"Redis settings not checked ({str(exc).splitlines()[0]}): "
                      "check by hand that maxmemory-policy is noeviction and persistence on",
                      (), "warning")
        return
    if policy != "noeviction":
        yield Finding("settings", f"maxmemory-policy is {policy}: at maxmemory Redis deletes "
                      "keys (leases, tasks) instead of refusing writes; set noeviction")
    if saving.get("appendonly") != "yes" and not saving.get("save"):
        yield Finding("settings", "persistence is off (appendonly no, save \"\"): a restart "
                      "loses every job of the namespace; enable AOF or RDB (docs/DEPLOY.md)",
                      (), "warning")


def check_scripts(r: redis.Redis, shas: dict[str, str]) -> Iterator[Finding]:
    """This release's scripts are loaded (restricted workers may only EVALSHA them)."""
    try:
        loaded = r.script_exists(*shas.values())
    except redis.ResponseError as exc:
        yield Finding("scripts", f"scripts not checked ({str(exc).splitlines()[0]})", (),
                      "warning")
        return
    missing = sorted(name for name, ok in zip(shas, loaded) if not ok)
    if missing:
        yield Finding("scripts", f"{len(missing)} of this release's scripts are not loaded "
                      f"({', '.join(missing[:6])}...): restricted workers cannot run them until "
                      "'nova-queue load-scripts'", (), "warning", ("load-scripts",))


def check_jobs(r: redis.Redis, keys: Keyspace, scan: KeyScan,
               leased_by_app: Counter[str]) -> Iterator[Finding]:
    """Every job's tasks (placement), counts and index entries; counts leased tasks per app
    into ``leased_by_app``."""
    for job_id in sorted(scan.jobs):
        j = dict(zip(JOB_FIELDS, r.hmget(keys.job(job_id), JOB_FIELDS)))
        if j["state"] in (None, "expired"):
            continue  # gone since the scan, or being deleted
        states: Counter[str] = Counter()
        n = 0
        for row in read_tasks(r, keys, job_id, j["app"] or ""):
            n += 1
            states[row.state or ""] += 1
            if row.state == "leased":
                leased_by_app[j["app"] or ""] += 1
            yield from _placement(keys, j, row)
        yield from _counts(keys, job_id, j, states, n, scan.task_keys.get(job_id, 0))
        yield Finding("indexes", f"job {job_id} is missing from its indexes",
                      (keys.job(job_id),), repair=("job", job_id))


def _placement(keys: Keyspace, j: dict[str, Any], row: Any) -> Iterator[Finding]:
    state, tid = row.state, row.tid
    wrong = []
    if state not in STATES and state != VERIFYING:
        yield Finding("placement", f"task {tid} has no valid state ({state!r})",
                      (keys.task(tid),))
        return
    if row.in_verify != (state == VERIFYING):
        yield Finding("placement", f"task {tid} is {state} but "
                      + ("in" if row.in_verify else "not in") + " its app's verify set",
                      (keys.task(tid), keys.verify(j["app"] or "")))
    if row.in_pending != (state == "pending") and not (state == "pending"
                                                        and j["state"] == "staging"):
        wrong.append(("in" if row.in_pending else "not in") + " its pending set")
    if row.in_leases != (state == "leased"):
        wrong.append(("in" if row.in_leases else "not in") + " the lease set")
    if state == "leased" and not row.held_by_worker:
        wrong.append(f"not in held:{row.worker}")
    if row.in_failed != (state == "failed"):
        wrong.append(("in" if row.in_failed else "not in") + " the failed set")
    if wrong:
        yield Finding("placement", f"task {tid} is {state} but " + ", ".join(wrong),
                      (keys.task(tid), keys.pending(j["app"] or "")), repair=("task", tid))


def _counts(keys: Keyspace, job_id: str, j: dict[str, Any], states: Counter[str], n: int,
            task_keys: int) -> Iterator[Finding]:
    if task_keys > n:
        yield Finding("orphans", f"job {job_id}: {task_keys - n} task keys past its first "
                      "missing index (no reader sees them)", (keys.job(job_id),))
    if j["state"] == "staging":
        return  # its counts are written when it is published
    off = [f"{s} {j[s]} for {states[s]} tasks" for s in STATES
           if _int(j[s]) != states[s]]
    if off:
        yield Finding("counts", f"job {job_id}: counts " + ", ".join(off), (keys.job(job_id),),
                      repair=("recount", job_id))
    elif (j["state"] not in FINISHED_STATES and n and n == _int(j["total"])
          and sum(states[s] for s in TERMINAL) == n):
        yield Finding("counts", f"job {job_id}: every task is terminal but it is {j['state']}",
                      (keys.job(job_id),), repair=("recount", job_id))
    elif j["state"] in ("done", "failed") and (states["done"] > 0) != (j["state"] == "done"):
        yield Finding("counts", f"job {job_id} is {j['state']} with {states['done']} of its "
                      f"{n} tasks done", (keys.job(job_id),), "warning")
    if _int(j[VERIFYING] or "0") != states[VERIFYING]:
        yield Finding("counts", f"job {job_id}: verifying {j[VERIFYING]} for "
                      f"{states[VERIFYING]} tasks", (keys.job(job_id),), "warning")
    if n != _int(j["total"]):
        yield Finding("counts", f"job {job_id} has {n} tasks from index 0 but declares "
                      f"{j['total']}", (keys.job(job_id),))


def check_members(r: redis.Redis, keys: Keyspace, scan: KeyScan) -> Iterator[Finding]:
    """Members of the pending sets, the lease set, the failed set and the held sets that name
    no task in that place (a task whose state puts it elsewhere is a placement finding)."""
    sets: list[tuple[str, str, str]] = [("pending", app, keys.pending(app))
                                        for app in sorted(scan.pending_apps)]
    sets += [("leases", "", keys.leases()), ("failed", "", keys.failed())]
    sets += [("held", wid, keys.held(wid)) for wid in sorted(scan.held)]
    for kind, name, key in sets:
        members = (r.sscan_iter(key, count=1000) if kind == "held"
                   else (m for m, _ in r.zscan_iter(key, count=1000)))
        for batch in _batches(members, 1000):
            yield from _member_batch(r, keys, kind, name, key, batch)


def _member_batch(r: redis.Redis, keys: Keyspace, kind: str, name: str, key: str,
                  batch: list[str]) -> Iterator[Finding]:
    pipe = r.pipeline(transaction=False)
    for m in batch:
        pipe.hmget(keys.task(m), "state", "worker", "b_worker")
    for m, (state, worker, b_worker) in zip(batch, pipe.execute()):
        if kind == "held":
            if state != "leased" or name not in (worker, b_worker):
                yield Finding("placement", f"held:{name} holds {m!r}, which {name} does not "
                              "lease", (key,), repair=("member", "held", name, m))
        elif state is None:
            yield Finding("placement", f"{kind} holds {m!r}, which is no task", (key,),
                          repair=("member", kind, name, m))


def check_workers(r: redis.Redis, keys: Keyspace, scan: KeyScan) -> Iterator[Finding]:
    """Workers in their indexes; live ones registered by this protocol; alive entries and held
    sets of workers Redis does not know."""
    alive = dict(r.zrange(keys.alive(), 0, -1, withscores=True))
    for wid in sorted(scan.workers):
        yield Finding("indexes", f"worker {wid} is missing from its indexes",
                      (keys.worker(wid),), repair=("worker", wid))
        recorded = r.hget(keys.worker(wid), "protocol")
        if wid in alive and recorded != str(protocol.PROTOCOL):
            yield Finding("protocol", f"worker {wid} is live but was registered by "
                          + ("a release before protocol checks" if recorded is None
                             else f"protocol {recorded!r}") + ": upgrade it",
                          (keys.worker(wid),), "warning")
    for wid in sorted(set(alive) - scan.workers):
        yield Finding("orphans", f"alive holds {wid!r}, which has no worker record",
                      (keys.alive(),))
    for wid in sorted(scan.held - scan.workers):
        yield Finding("orphans", f"held:{wid} belongs to no worker", (keys.held(wid),))


def check_inflight(r: redis.Redis, keys: Keyspace, leased: Counter[str]) -> Iterator[Finding]:
    """inflight[app] equals the app's leased tasks."""
    counted = {a: int(v) for a, v in r.hgetall(keys.inflight()).items() if _is_int(v)}
    for app in sorted(set(counted) | set(leased)):
        if counted.get(app, 0) != leased.get(app, 0):
            yield Finding("counts", f"inflight[{app}] is {counted.get(app, 0)} for "
                          f"{leased.get(app, 0)} leased tasks", (keys.inflight(),),
                          repair=("inflight", app))


def check_orphans(keys: Keyspace, scan: KeyScan) -> Iterator[Finding]:
    """Keys that belong to nothing: tasks of no job, stage sets of no job, unknown names."""
    for job_id in sorted(set(scan.task_keys) - scan.jobs):
        yield Finding("orphans", f"{scan.task_keys[job_id]} task keys of job {job_id}, which "
                      f"has no job record ('nova-queue purge {job_id}' deletes them)",
                      (keys.task(f"{job_id}:0"),))
    for job_id in sorted(scan.stages - scan.jobs):
        yield Finding("orphans", f"stage:{job_id} belongs to no job", (keys.stage(job_id),))
    for key in sorted(scan.unknown)[:100]:
        yield Finding("orphans", f"{key!r} is no key of nova-queue's schema", (key,),
                      "warning")


def _batches(items: Iterable[str], n: int) -> Iterator[list[str]]:
    batch: list[str] = []
    for item in items:
        batch.append(item)
        if len(batch) == n:
            yield batch
            batch = []
    if batch:
        yield batch


def _int(v: Any) -> int:
    return int(v) if _is_int(v) else -1


def _is_int(v: Any) -> bool:
    return isinstance(v, str) and v.lstrip("-").isdigit() and len(v) < 16
