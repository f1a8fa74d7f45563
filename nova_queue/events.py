"""The types of the namespace's event stream (``nova:{ns}:events``): the one table of them.

Each entry of the stream has a field ``type``, one of :data:`EVENT_TYPES`, and exactly the
fields listed for that type (the scripts in ``nova_queue/lua/`` write them with ``emit``;
``tests/core/test_events.py`` checks every ``emit`` call against this table, and that the
gallery's presenter, ``web/present.py``, has a line for every type). Its time is the
stream id's. Common fields: ``job`` a job id, ``task`` a task's index in its job,
``worker`` a worker id and ``name`` its display name, ``lease_gen`` the lease generation,
``attempt`` the task's attempt count, ``kind`` a failure kind (error, oom, infra,
shutdown, prepare, invalid, expired, lost, timeout, cancelled; refund for attempts given
back), ``error`` a message. A task can run as two attempts at once (a backup attempt at the tail): each has
its own ``lease_gen``, and the first to commit wins.

One call that claims or commits several tasks writes their ``claimed`` or ``completed``
events as one entry, of a type in :data:`PACKED_TYPES` (``claimed_many``,
``completed_many``): the fields the tasks share once, each other field a comma list in task
order (one value when every task has the same). :func:`unpack` turns an entry back into
its per-task events, and every reader here (:meth:`NovaClient.events` and what uses it)
sees only those: an :class:`Event` of a packed entry has the entry's stream ``id`` (the
cursor to read after) and its place in it, ``part``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from nova_queue.limits import MAX_CLAIM_K


@dataclasses.dataclass(frozen=True)
class EventType:
    """One type of event: its name, its fields besides ``type``, and what it means."""

    name: str
    fields: tuple[str, ...]
    meaning: str


#: What release writes when a lease ends without a commit.
_RELEASED = ("job", "task", "worker", "kind", "attempt", "lease_gen", "error")
#: What remove_worker writes when a worker leaves the fleet.
_REMOVED = ("worker", "name", "released")
#: What settle_backup writes when the first of a task's two attempts commits.
_SETTLED = ("job", "task", "worker", "lease_gen", "loser", "loser_gen", "loser_run_s")

#: Every event type by name.
EVENT_TYPES: dict[str, EventType] = {t.name: t for t in (
    EventType("enqueued", ("job", "app", "total"),
              "a job was published: its ``total`` tasks of ``app`` are pending"),
    EventType("claimed", ("job", "task", "worker", "name", "backend", "lease_gen", "attempt",
                          "predicted_s"),
              "a worker leased a task; ``predicted_s`` its predicted run time ('' if none)"),
    EventType("completed", ("job", "task", "worker", "lease_gen", "run_s", "warm", "result"),
              "a lease holder committed its result (``warm`` 1 or 0; ``result`` the store key)"),
    EventType("stale_rejected", ("job", "task", "worker", "op", "lease_gen", "current_gen",
                                 "state", "code"),
              "a complete or fail (``op``) that no longer held the lease was refused; "
              "``code`` the status code, ``state`` and ``current_gen`` the task's"),
    EventType("requeued", _RELEASED,
              "a lease ended without a result and the task is pending again"),
    EventType("failed", _RELEASED,
              "a lease ended without a result and the task is out of attempts: failed"),
    EventType("cancelled", _RELEASED,
              "a lease ended because its job was cancelled: the task is cancelled"),
    EventType("retried", ("job", "task"), "a failed task was put back in the queue by hand"),
    EventType("backup_started", ("job", "task", "worker", "name", "backend", "lease_gen",
                                 "attempt", "predicted_s", "of"),
              "an idle worker started a backup attempt of a task that worker ``of`` runs, "
              "predicting it finishes clearly sooner; both run, the first commit wins"),
    EventType("backup_won", _SETTLED,
              "the backup attempt committed first; the ``loser`` attempt (its worker, "
              "``loser_gen``, how long it ran) is stale from now on"),
    EventType("backup_lost", _SETTLED,
              "the task's first attempt committed before its backup; the backup (``loser``) "
              "is stale from now on"),
    EventType("verifying", ("job", "task", "worker", "lease_gen", "result", "need"),
              "a result of a worker that is not trusted was sampled for verification: the "
              "task awaits another worker's run (``need`` trusted: two untrusted results "
              "disagreed, a trusted worker decides)"),
    EventType("verify_started", ("job", "task", "worker", "name", "backend", "lease_gen", "of",
                                 "free"),
              "a worker started re-running a task to check the result worker ``of`` made "
              "(``free`` 1: its backup attempt, running already, checks it)"),
    EventType("verified", ("job", "task", "worker", "by"),
              "worker ``by`` agreed with the result ``worker`` made: the result stands"),
    EventType("mismatch", ("job", "task", "worker", "by", "reopened"),
              "``worker``'s result did not match trusted worker ``by``'s: it is discarded, "
              "the worker quarantined and its trust reset, and the ``reopened`` results it "
              "committed unverified run again"),
    EventType("invalidated", ("job", "task", "worker", "ident"),
              "a result that stood unverified was withdrawn (its maker, identity ``ident``, "
              "was caught returning a wrong result): the task runs again"),
    EventType("unverified", ("job", "task", "worker", "state"),
              "a result awaited verification but no live worker may verify it: ``state`` "
              "done, it stands unverified (it runs again if its maker is caught later), or "
              "failed (two untrusted results disagreed and no trusted worker is live)"),
    EventType("trusted", ("worker", "ident", "agreements"),
              "an identity earned trust after ``agreements`` verified results in a row: its "
              "results are spot-checked from now on"),
    EventType("attempt_ended", ("job", "task", "worker", "lease_gen", "kind", "error"),
              "one of a task's two running attempts ended without a result (``kind`` as for "
              "requeued); the other runs on"),
    EventType("job_finished", ("job", "state", "done", "failed", "cancelled"),
              "every task of a job is terminal; ``state`` done (a task or more done; "
              "``failed`` counts the rest), failed (not one task done) or cancelled, with "
              "the counts"),
    EventType("job_cancelled", ("job",), "a job was cancelled: none of its tasks runs again"),
    EventType("deadline_behind", ("job", "worker", "deadline_ms"),
              "a claim found that the live pool cannot finish a job by its deadline: it runs "
              "as fast as it can, on any worker (once per job)"),
    EventType("budget_held", ("job", "worker", "budget", "spent"),
              "a claim held a job's tasks back from a priced worker: they would take its "
              "predicted spend past its budget; it waits for cheaper capacity (once per job)"),
    EventType("worker_joined", ("worker", "name", "backend", "host", "apps", "rejoined"),
              "a worker registered (``rejoined`` 1 if its id was known); ``apps`` comma list"),
    EventType("worker_left", _REMOVED,
              "a worker deregistered; its ``released`` leases went back without an attempt"),
    EventType("worker_lost", _REMOVED,
              "a worker's heartbeat expired; its ``released`` leases were released"),
    EventType("worker_quarantined", ("worker", "name", "reason", "until_ms", "refunded"),
              "a worker's claims are refused: its failures succeed elsewhere (``reason``: how "
              "and its last error); it probes with one task after ``until_ms``; ``refunded`` "
              "tasks got the attempts it used back"),
    EventType("worker_released", ("worker", "name", "by"),
              "a quarantined worker may claim again: its probe task committed (``by`` probe) "
              "or an admin let it back (``by`` admin)"),
    EventType("model_loading", ("worker", "name", "app", "model"),
              "a worker started loading ``model`` for ``app`` (its ``loading:<app>`` field "
              "says since when, until ``model_loaded``)"),
    EventType("model_loaded", ("worker", "name", "app", "model", "load_s"),
              "a worker loaded ``model`` for ``app`` in ``load_s``: it holds it warm, and "
              "claims prefer that model's jobs for it"),
    EventType("job_expired", ("job", "tasks", "why"),
              "a finished job's Redis data (its ``tasks`` tasks too) was deleted: ``why`` "
              "retention (its time ran out) or purge (``nova-queue purge``); results stay "
              "in the store unless purged"),
    EventType("worker_forgotten", ("worker",),
              "a worker that left or was lost one retention ago was deleted from Redis"),
    EventType("repaired", ("op", "target", "what"),
              "``nova-queue doctor --repair`` fixed ``target`` (a task, job, app, worker or "
              "set member; ``op`` the check): ``what`` it did"),
    EventType("grace", ("gap_ms", "until_ms"),
              "no script ran for ``gap_ms`` (Redis was unreachable): nothing is reaped until "
              "``until_ms``, so lease holders can renew first"),
)}


@dataclasses.dataclass(frozen=True)
class PackedType:
    """Entries that stand for up to MAX_CLAIM_K events of type ``of``: ``shared`` fields
    are the same for all, ``lists`` are comma lists (``task`` always one value per event)."""

    name: str
    of: str
    shared: tuple[str, ...]
    lists: tuple[str, ...]


#: The packed entry types by name (written by nova_queue/lua/includes/emit_claimed.lua and
#: emit_completed.lua).
PACKED_TYPES: dict[str, PackedType] = {t.name: t for t in (
    PackedType("claimed_many", "claimed", ("worker", "name", "backend"),
               ("job", "task", "lease_gen", "attempt", "predicted_s")),
    PackedType("completed_many", "completed", ("worker",),
               ("job", "task", "lease_gen", "run_s", "warm", "result")),
)}


@dataclasses.dataclass(frozen=True)
class Event:
    """One event of the namespace's stream: ``id`` the stream id of its entry, ``part`` its
    place in a packed entry (0 otherwise)."""

    id: str
    type: str
    ts_ms: int
    fields: dict[str, str]
    part: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "part": self.part, "type": self.type, "ts_ms": self.ts_ms,
                **self.fields}


def unpack(fields: Mapping[str, str]) -> list[dict[str, str]]:
    """An entry's events as field dicts (``type`` included, in the field order of
    :data:`EVENT_TYPES`): one for a plain entry, one per task for a packed one. A packed
    entry whose lists do not match (not written by the scripts) comes back as it is."""
    packed = PACKED_TYPES.get(fields.get("type", ""))
    if packed is None:
        return [dict(fields)]
    tasks = fields.get("task", "").split(",")
    n = len(tasks)
    columns: dict[str, list[str]] = {}
    for name in packed.lists:
        values = fields.get(name, "").split(",")
        if len(values) not in (1, n) or name not in fields:
            return [dict(fields)]
        columns[name] = values if len(values) == n else values * n
    if not 2 <= n <= MAX_CLAIM_K or any(name not in fields for name in packed.shared):
        return [dict(fields)]
    order = EVENT_TYPES[packed.of].fields
    return [{"type": packed.of, **{name: columns[name][i] if name in columns else fields[name]
                                   for name in order}} for i in range(n)]


def entry_events(eid: str, fields: Mapping[str, str]) -> list[Event]:
    """The events of one stream entry (its id and fields as Redis returns them)."""
    ts_ms = int(eid.split("-")[0])
    out = []
    for part, f in enumerate(unpack(fields)):
        etype = f.pop("type", "")
        out.append(Event(id=eid, type=etype, ts_ms=ts_ms, fields=f, part=part))
    return out
