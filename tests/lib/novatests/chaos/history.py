"""The chaos checker: replays a namespace's event stream (the history of claims, commits,
rejections and requeues, in the order Redis ran them) and compares it with the final state.

Scripts are atomic and each appends its events before it returns, so the stream order is
the order in which Redis applied the state changes. Per task the replay tracks the live
attempts ``(worker, lease_gen)``: one, or two while a backup attempt runs beside the first:

- ``claimed`` while an attempt is live                 -> two live leases (``overlap``)
- ``claimed`` or ``backup_started`` with a lease_gen not above every earlier one, or a
  ``backup_started`` unless exactly one other worker's attempt is live -> ``overlap``
- ``backup_won`` / ``backup_lost`` end the losing attempt, ``attempt_ended`` one attempt,
  a release (requeued / failed / cancelled) every attempt
- ``completed`` that is not a live attempt             -> stale commit accepted
- more than one ``completed``                          -> committed twice (``double``)
- a task that should be terminal but is not, a missing task hash, or a done task whose
  result object is missing from the store              -> ``lost``
- verification (docs/SECURITY.md): ``verifying`` ends the attempt whose result is held,
  ``verify_started`` is a claim, a ``completed`` right after ``verified`` by the live
  verifier is the candidate's result standing (its maker's name, the verifier's
  lease_gen), ``invalidated`` withdraws the task's commit (it may commit again); a done
  task whose result an identity caught lying (``mismatch``) committed before it was caught,
  and nobody verified                                  -> ``forged``; ``unverified`` (no
  verifier is live) lets the held result's ``completed`` come without a live attempt

Client-side records (commits a test saw accepted) are checked against the final task hash:
an accepted commit that is not the committed lease is a stale commit accepted, and two
different accepted commits of one task are a double commit.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

from nova_queue import doctor
from nova_queue.events import unpack
from nova_queue.keys import ident_of

RELEASES = ("requeued", "failed", "cancelled")
TERMINAL = ("done", "failed", "cancelled")


@dataclasses.dataclass(frozen=True)
class Accepted:
    """A commit a client saw succeed (``complete`` returned OK or ALREADY)."""

    task_id: str
    worker_id: str
    lease_gen: int
    attempt_id: str
    result_key: str


@dataclasses.dataclass
class Verdict:
    """What the checker found in one run."""

    tasks: int = 0
    lost: int = 0
    double: int = 0
    stale_accepted: int = 0
    overlap: int = 0
    claims: int = 0
    commits: int = 0
    rejected: int = 0
    requeued: int = 0
    backups: int = 0
    verified: int = 0
    forged: int = 0
    problems: list[str] = dataclasses.field(default_factory=list)
    #: identity -> the stream id of the mismatch that caught it first
    caught: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.double or self.stale_accepted or self.overlap
                    or self.forged)

    def summary(self) -> str:
        head = (f"tasks={self.tasks} lost={self.lost} double={self.double} "
                f"stale_accepted={self.stale_accepted} overlap={self.overlap} "
                f"claims={self.claims} commits={self.commits} rejected={self.rejected} "
                f"requeued={self.requeued} backups={self.backups} verified={self.verified} "
                f"forged={self.forged}")
        return head + "".join(f"\n  - {p}" for p in self.problems[:30])


def read_events(nova, page: int = 10_000) -> list[tuple[str, dict[str, str]]]:
    """Every event of the namespace, oldest first, as ``(id, fields)`` (a packed entry's
    events each with its id: nova_queue.events.unpack)."""
    key = nova.keys.events()
    out: list[tuple[str, dict[str, str]]] = []
    start = "-"
    while True:
        rows = nova.redis.xrange(key, start, "+", count=page)
        out += [(eid, f) for eid, row in rows for f in unpack(row)]
        if len(rows) < page:
            return out
        start = "(" + rows[-1][0]


@dataclasses.dataclass
class _Task:
    live: set[tuple[str, int]] = dataclasses.field(default_factory=set)
    last_gen: int = 0
    commits: list[tuple[str, int, str]] = dataclasses.field(default_factory=list)
    backups: int = 0
    #: the stream id of each commit (parallel to commits)
    commit_ids: list[str] = dataclasses.field(default_factory=list)
    #: the verifier whose ``verified`` event was the task's last one
    verified_by: str = ""
    #: an ``unverified`` event came: the held result stands without a live attempt
    standing: bool = False


def replay(events: Iterable[tuple[str, dict[str, str]]], verdict: Verdict) -> dict[str, _Task]:
    """Replay the stream into per-task histories, counting violations into ``verdict``."""
    tasks: dict[str, _Task] = collections.defaultdict(_Task)
    for eid, f in events:
        etype = f.get("type")
        if etype == "mismatch":
            verdict.caught.setdefault(ident_of(f["worker"]), eid)
        if "job" not in f or "task" not in f:
            continue
        tid = f"{f['job']}:{f['task']}"
        t = tasks[tid]
        if etype in ("claimed", "backup_started", "verify_started"):
            _claimed(eid, tid, etype, f, t, verdict)
        elif etype == "verifying":  # the result is held: the attempt ended
            t.live.discard((f["worker"], int(f["lease_gen"])))
        elif etype == "verified":
            t.verified_by = f["by"]
            verdict.verified += 1
        elif etype == "unverified":  # no verifier is live: the held result stands
            t.standing = True
        elif etype == "invalidated" and t.commits:  # withdrawn: the task runs again
            t.commits.pop()
            t.commit_ids.pop()
        elif etype in ("backup_won", "backup_lost"):
            t.live.discard((f["loser"], int(f["loser_gen"])))
        elif etype == "attempt_ended":
            t.live.discard((f["worker"], int(f["lease_gen"])))
        elif etype == "completed":
            _completed(eid, tid, f, t, verdict)
        elif etype in RELEASES and "lease_gen" in f:
            if etype == "requeued":
                verdict.requeued += 1
            if (f.get("worker"), int(f["lease_gen"])) in t.live:
                t.live = set()  # a release ends the task's backup attempt too
        elif etype == "stale_rejected":
            verdict.rejected += 1
    return tasks


def _claimed(eid: str, tid: str, etype: str, f: dict[str, str], t: _Task,
             verdict: Verdict) -> None:
    """A claim (or a backup attempt): no other live attempt (a backup: exactly one, of
    another worker), and a lease_gen above every earlier one."""
    verdict.claims += 1
    gen, who = int(f["lease_gen"]), (f["worker"], int(f["lease_gen"]))
    backup = etype == "backup_started"
    if backup:
        t.backups += 1
        verdict.backups += 1
    if (backup and (len(t.live) != 1 or f["worker"] in {w for w, _ in t.live})) or (
            not backup and t.live):
        verdict.overlap += 1
        verdict.problems.append(f"{eid} {tid}: {etype} by {f['worker']} gen {gen} "
                                f"while {sorted(t.live)} live")
    elif gen <= t.last_gen:
        verdict.overlap += 1
        verdict.problems.append(f"{eid} {tid}: lease_gen {gen} after {t.last_gen}")
    t.live.add(who)
    t.last_gen = max(gen, t.last_gen)


def _completed(eid: str, tid: str, f: dict[str, str], t: _Task, verdict: Verdict) -> None:
    """A commit: accepted only from the one live attempt."""
    verdict.commits += 1
    holder = (f["worker"], int(f["lease_gen"]))
    verifier = [a for a in t.live if a[0] == t.verified_by]
    if t.verified_by and verifier:
        holder = verifier[0]  # the verifier agreed: the candidate's result stands
    standing, t.verified_by, t.standing = t.standing and not t.live, "", False
    if not standing and (holder not in t.live or len(t.live) != 1):
        verdict.stale_accepted += 1
        verdict.problems.append(f"{eid} {tid}: commit by {holder} accepted, live "
                                f"{sorted(t.live)}")
    t.commits.append((f["worker"], int(f["lease_gen"]), f.get("result", "")))
    t.commit_ids.append(eid)
    t.live = set()


def check(nova, jobs: Sequence[str], *, store: Any = None, accepted: Iterable[Accepted] = (),
          expect: str = "terminal") -> Verdict:
    """Check every task of ``jobs``: ``expect`` is ``terminal`` (done/failed/cancelled) or
    ``done``. ``store``: also check that each done task's result exists (in the store, or
    held in Redis for a small one: nova_queue/results.py)."""
    from nova_queue.results import Results

    verdict = Verdict()
    if store is not None:
        store = Results(nova.redis, nova.keys, store)
    events = read_events(nova)
    enqueued = {f.get("job") for _, f in events if f.get("type") == "enqueued"}
    missing = [j for j in jobs if j not in enqueued]
    if missing:
        raise AssertionError(f"event stream incomplete (trimmed?): no enqueued event for {missing}")
    histories = replay(events, verdict)
    # events of other jobs in the namespace are replayed but not counted as this run's tasks
    counted_double: set[str] = set()
    counted_stale: set[str] = set()
    finals: dict[str, Any] = {}
    for job in jobs:
        total = int(nova.redis.hget(nova.keys.job(job), "total") or 0)
        verdict.tasks += total
        for info in nova.tasks(job, 0, total):
            finals[info.task_id] = info
        for index in range(total):
            tid = f"{job}:{index}"
            _check_task(verdict, tid, finals.get(tid), histories.get(tid, _Task()),
                        expect=expect, store=store, counted_double=counted_double,
                        counted_stale=counted_stale)
    _check_accepted(verdict, accepted, set(jobs), finals, counted_double=counted_double,
                    counted_stale=counted_stale)
    return verdict


def _check_task(verdict: Verdict, tid: str, info: Any, hist: _Task, *, expect: str,
                store: Any, counted_double: set[str], counted_stale: set[str]) -> None:
    """One task's final state against its replayed history (and its result object)."""
    if info is None:
        verdict.lost += 1
        verdict.problems.append(f"{tid}: task hash missing")
        return
    ok_states = ("done",) if expect == "done" else TERMINAL
    if info.state not in ok_states:
        verdict.lost += 1
        verdict.problems.append(f"{tid}: ended {info.state}, expected {expect}")
    if len(hist.commits) > 1:
        verdict.double += 1
        counted_double.add(tid)
        verdict.problems.append(f"{tid}: committed {len(hist.commits)} times")
    if info.state == "done":
        last = hist.commits[-1] if hist.commits else None
        if last != (info.worker_id, info.lease_gen, info.result):
            verdict.stale_accepted += tid not in counted_stale
            counted_stale.add(tid)
            verdict.problems.append(f"{tid}: final commit {last} does not match the "
                                    f"task ({info.worker_id}, {info.lease_gen})")
        if store is not None and store.head(info.result) is None:
            verdict.lost += 1
            verdict.problems.append(f"{tid}: result {info.result} missing (store and Redis)")
        caught = verdict.caught.get(ident_of(info.worker_id))
        if caught and not info.verified_by and hist.commit_ids and _before(
                hist.commit_ids[-1], caught):
            verdict.forged += 1
            verdict.problems.append(f"{tid}: its result from {info.worker_id}, caught lying at "
                                    f"{caught}, stands unverified")


def _before(a: str, b: str) -> bool:
    """Whether stream id ``a`` comes before ``b``."""
    return tuple(map(int, a.split("-"))) < tuple(map(int, b.split("-")))


def _check_accepted(verdict: Verdict, accepted: Iterable[Accepted], wanted: set[str],
                    finals: dict[str, Any], *, counted_double: set[str],
                    counted_stale: set[str]) -> None:
    """The commits clients saw accepted against the final task hashes."""
    by_task: dict[str, set[tuple[int, str]]] = collections.defaultdict(set)
    for a in accepted:
        if a.task_id.rpartition(":")[0] not in wanted:
            continue
        by_task[a.task_id].add((a.lease_gen, a.attempt_id))
        info = finals.get(a.task_id)
        current = info and (info.state, info.worker_id, info.lease_gen, info.attempt_id,
                            info.result)
        if current != ("done", a.worker_id, a.lease_gen, a.attempt_id, a.result_key):
            if a.task_id not in counted_stale:
                verdict.stale_accepted += 1
                counted_stale.add(a.task_id)
            verdict.problems.append(f"{a.task_id}: client saw commit gen {a.lease_gen} accepted "
                                    f"but the task is {current}")
    for tid, seen in by_task.items():
        if len(seen) > 1 and tid not in counted_double:
            verdict.double += 1
            verdict.problems.append(f"{tid}: client saw {len(seen)} different commits accepted")


def invariants(nova, jobs: Sequence[str]) -> list[str]:
    """Cross-key consistency of a namespace: counters, leases, held sets, pending sets; then
    ``nova-queue doctor``'s checks of the whole namespace (every scenario ends with them),
    whose problems count too."""
    problems = _job_invariants(nova, jobs)
    report = doctor.diagnose(nova)
    problems += [f"doctor: {f.message} {list(f.keys)}" for f in report.problems]
    return problems


def _job_invariants(nova, jobs: Sequence[str]) -> list[str]:
    """The counters, leases, held sets and pending sets of ``jobs``."""
    k = nova.keys
    problems: list[str] = []
    leased_ids: set[str] = set()
    by_app: collections.Counter[str] = collections.Counter()
    for job in jobs:
        h = nova.redis.hgetall(k.job(job))
        total = int(h.get("total", 0))
        states = collections.Counter()
        for info in nova.tasks(job, 0, total):
            states[info.state] += 1
            if info.state == "leased":
                leased_ids.add(info.task_id)
                by_app[h["app"]] += 1
                holders = [info.worker_id] + ([info.backup["worker_id"]] if info.backup else [])
                for wid in holders:
                    if not nova.redis.sismember(k.held(wid), info.task_id):
                        problems.append(f"{info.task_id}: leased but not in held:{wid}")
            elif info.backup:
                problems.append(f"{info.task_id}: state {info.state} with a backup attempt")
            in_pending = nova.redis.zscore(k.pending(h["app"]), info.task_id) is not None
            if in_pending != (info.state == "pending"):
                problems.append(f"{info.task_id}: state {info.state}, in pending set {in_pending}")
        for state in ("pending", "leased", "done", "failed", "cancelled"):
            if int(h.get(state, 0)) != states[state]:
                problems.append(f"job {job}: counter {state}={h.get(state)} but "
                                f"{states[state]} tasks are {state}")
        if sum(states.values()) != total:
            problems.append(f"job {job}: {sum(states.values())} task hashes for {total} tasks")
    mine = {m for m in nova.redis.zrange(k.leases(), 0, -1)
            if m.rpartition(":")[0] in set(jobs)}
    if mine != leased_ids:
        problems.append(f"leases zset {sorted(mine)} != leased tasks {sorted(leased_ids)}")
    for app, n in by_app.items():
        got = int(nova.redis.hget(k.inflight(), app) or 0)
        if got < n:
            problems.append(f"inflight[{app}]={got} < {n} leased tasks")
    return problems
