"""The types of the namespace's event stream (``nova:{ns}:events``): the one table of them.

Each entry of the stream has a field ``type``, one of :data:`EVENT_TYPES`, and exactly the
fields listed for that type (the scripts in ``nova_queue/lua/`` write them with ``emit``;
``tests/core/test_events.py`` checks every ``emit`` call against this table, and that the
gallery's presenter, ``web/present.py``, has a line for every type). Its time is the
stream id's. Common fields: ``job`` a job id, ``task`` a task's index in its job,
``worker`` a worker id and ``name`` its display name, ``lease_gen`` the lease generation,
``attempt`` the task's attempt count, ``kind`` a failure kind (error, oom, infra,
shutdown, expired, lost, timeout, cancelled; refund for attempts given back), ``error`` a
message. A task can run as two attempts at once (a backup attempt at the tail): each has
its own ``lease_gen``, and the first to commit wins.
"""

from __future__ import annotations

import dataclasses


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
    EventType("attempt_ended", ("job", "task", "worker", "lease_gen", "kind", "error"),
              "one of a task's two running attempts ended without a result (``kind`` as for "
              "requeued); the other runs on"),
    EventType("job_finished", ("job", "state", "done", "failed", "cancelled"),
              "every task of a job is terminal; ``state`` done or cancelled, with the counts"),
    EventType("job_cancelled", ("job",), "a job was cancelled: none of its tasks runs again"),
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
