"""A job's timeline: every attempt at its tasks, per worker, from the event stream.

The stream holds each transition in the order Redis applied it (``nova_queue/events.py``):
``claimed`` and ``backup_started`` open an attempt ``(task, lease_gen)``; ``completed``,
a release (``requeued`` / ``failed`` / ``cancelled``), ``attempt_ended`` and the backup
verdicts (``backup_won`` / ``backup_lost``) close it; ``stale_rejected`` marks an attempt
whose late report was turned away. Verification (docs/SECURITY.md): ``verifying`` closes an
attempt whose result is held (``held``), ``verify_started`` opens the re-run that checks it
(``verify``; with ``free`` the task's running backup attempt becomes that check); ``verified`` makes the held attempt ``verified`` and the re-run ``agreed``,
``mismatch`` makes it ``mismatch``, ``unverified`` makes it ``unverified`` (no verifier was
live: it stands), and ``invalidated`` makes a committed attempt ``invalidated`` (its
maker was caught: the task runs again). The gallery draws one lane per worker and one bar per
attempt. The stream is trimmed (``NOVA_EVENTS_MAXLEN``): for an old job the first attempts
may be gone, and ``complete`` says whether the job's first event was still there.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from nova_queue.models import Event

#: Most events one timeline reads (newer ones of other jobs included).
MAX_EVENTS = 50_000
#: Stream entries per read (a packed entry holds up to 64 events: nova_queue/events.py).
PAGE_ENTRIES = 500
#: How a release's ``kind`` shows on its attempt's bar.
RELEASE_OUTCOMES = {"expired": "lost", "lost": "lost", "timeout": "timed out", "error": "failed",
                    "oom": "failed", "shutdown": "handed back", "infra": "handed back",
                    "prepare": "handed back", "invalid": "handed back",
                    "cancelled": "cancelled"}


@dataclasses.dataclass
class Attempt:
    """One attempt: a lease of a task by a worker, from its start to how it ended."""

    task: int
    lease_gen: int
    worker_id: str
    start_ms: int
    end_ms: int | None = None
    #: running | committed | lost | timed out | failed | handed back | cancelled |
    #: backup won | backup lost | superseded | held | verified | agreed | mismatch |
    #: unverified | invalidated
    outcome: str = "running"
    backup: bool = False
    #: a re-run that checks another worker's result
    verify: bool = False
    stale: bool = False
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def job_timeline(client, job_id: str) -> dict[str, Any]:
    """``{job, t0_ms, now_ms, complete, lanes: [{worker_id, name, backend, attempts}]}``:
    the attempts of ``job_id`` from the stream, grouped by worker (first to start first)."""
    status = client.job(job_id, with_tasks=False)
    events, complete = _job_events(client, job_id, status.created_ms)
    attempts = replay(events)
    names = {w.worker_id: w for w in client.workers()}
    lanes: dict[str, dict[str, Any]] = {}
    for a in sorted(attempts, key=lambda a: (a.start_ms, a.task)):
        lane = lanes.get(a.worker_id)
        if lane is None:
            w = names.get(a.worker_id)
            lane = lanes[a.worker_id] = {
                "worker_id": a.worker_id, "name": w.name if w else a.worker_id,
                "backend": w.backend if w else "", "quarantined": bool(w and w.quarantined),
                "attempts": []}
        lane["attempts"].append(a.to_json())
    return {"job": job_id, "state": status.state, "t0_ms": status.created_ms,
            "finished_ms": status.finished_ms, "now_ms": client.server_time_ms(),
            "complete": complete, "lanes": list(lanes.values())}


def _job_events(client, job_id: str, since_ms: int) -> tuple[list[Event], bool]:
    """The job's events from its creation on (at most MAX_EVENTS read), and whether its
    ``enqueued`` event was among them (nothing trimmed away)."""
    out: list[Event] = []
    after = f"{max(since_ms - 1, 0)}-0"
    read = 0
    while read < MAX_EVENTS:
        page = client.events(after, count=PAGE_ENTRIES)
        if not page:
            break
        read += len(page)
        out += [e for e in page if e.fields.get("job") == job_id]
        after = page[-1].id
    return out, any(e.type == "enqueued" for e in out)


def replay(events: list[Event]) -> list[Attempt]:
    """Attempts from a job's events, oldest first (see the module docstring)."""
    attempts: list[Attempt] = []
    live: dict[tuple[int, int], Attempt] = {}
    by_worker: dict[tuple[int, str], Attempt] = {}  # the last attempt of (task, worker)
    for e in events:
        f = e.fields
        if "task" not in f:
            continue
        task = int(f["task"])
        gen = int(f.get("lease_gen") or 0)
        if e.type in ("claimed", "backup_started", "verify_started"):
            _start(e, task, gen, attempts, live, by_worker)
        elif e.type in VERDICTS:
            _verdict(e.type, f, task, live, by_worker, e.ts_ms)
        elif e.type == "completed":
            _end(live, task, gen, e.ts_ms, "committed")
        elif e.type in ("backup_won", "backup_lost"):
            winner = live.get((task, gen))
            if winner is not None and e.type == "backup_won":
                winner.outcome = "backup won"  # completed follows and keeps it
            _end(live, task, int(f.get("loser_gen") or 0), e.ts_ms,
                 "backup lost" if e.type == "backup_won" else "superseded")
        elif e.type == "attempt_ended" or (e.type in ("requeued", "failed", "cancelled")
                                           and f.get("worker")):
            _release(e.type, f, task, gen, live, e.ts_ms)
        elif e.type == "stale_rejected":
            a = by_worker.get((task, f.get("worker", "")))
            if a is not None and a.lease_gen == gen:
                a.stale = True
    return attempts


def _start(e: Event, task: int, gen: int, attempts: list[Attempt],
           live: dict[tuple[int, int], Attempt],
           by_worker: dict[tuple[int, str], Attempt]) -> None:
    """An attempt starts; a free check (``verify_started`` with ``free`` 1) is the task's
    backup attempt, running already, that now checks the result committed first."""
    if e.type == "verify_started" and e.fields.get("free") == "1" and (task, gen) in live:
        live[(task, gen)].verify = True
        return
    a = Attempt(task, gen, e.fields.get("worker", ""), e.ts_ms,
                backup=e.type == "backup_started", verify=e.type == "verify_started")
    attempts.append(a)
    live[(task, gen)] = by_worker[(task, a.worker_id)] = a


def _release(etype: str, f: dict[str, str], task: int, gen: int,
             live: dict[tuple[int, int], Attempt], ts_ms: int) -> None:
    """An attempt ended without a result (``attempt_ended``: that one; a release: every
    attempt of the task), its outcome from the event's ``kind``."""
    outcome = RELEASE_OUTCOMES.get(f.get("kind", ""), "lost")
    gens = [gen] if etype == "attempt_ended" else [k[1] for k in live if k[0] == task]
    for g in gens:
        _end(live, task, g, ts_ms, outcome, f.get("error", ""))


#: Verification events and what they make of the attempts they name.
VERDICTS = ("verifying", "verified", "mismatch", "unverified", "invalidated")


def _verdict(etype: str, f: dict[str, str], task: int, live: dict[tuple[int, int], Attempt],
             by_worker: dict[tuple[int, str], Attempt], ts_ms: int) -> None:
    """A verification event: the held attempt (its maker's, ``worker``) and the re-run
    (``by``) take the outcome it says."""
    if etype == "verifying":
        _end(live, task, int(f.get("lease_gen") or 0), ts_ms, "held")
        return
    made = by_worker.get((task, f.get("worker", "")))
    if made is not None and made.end_ms is not None:
        made.outcome = {"verified": "verified", "mismatch": "mismatch",
                        "unverified": "unverified", "invalidated": "invalidated"}[etype]
    check = by_worker.get((task, f.get("by", "")))
    if etype == "verified" and check is not None and check.verify:
        _end(live, task, check.lease_gen, ts_ms, "agreed")  # the candidate's result stands


def _end(live: dict[tuple[int, int], Attempt], task: int, gen: int, ts_ms: int, outcome: str,
         error: str = "") -> None:
    a = live.pop((task, gen), None)
    if a is None:
        return
    a.end_ms = ts_ms
    if not (outcome == "committed" and a.outcome == "backup won"):
        a.outcome = outcome
    a.error = error[:300]
