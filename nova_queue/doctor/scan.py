"""What ``nova-queue doctor`` reads: every key of a namespace, classified by its name
(:class:`KeyScan`), and the tasks of one job with where they are (:func:`read_tasks`).

Reads are plain commands (``SCAN``, pipelined ``HMGET`` / ``ZMSCORE``), not atomic: on a live
pool what they find is only a candidate, which the doctor confirms with the ``repair``
script in its check mode (``repairs``).
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Iterator

import redis

from nova_queue.keys import Keyspace

#: Keys of a namespace with no id in their name.
SINGLETONS = frozenset({"jobs", "staging", "leases", "inflight", "seq", "apps", "failed",
                        "finished", "expiring", "expired", "workers", "departed", "idents",
                        "alive", "meta", "events", "usage", "shares", "tokens"})
SHAPES = [
    ("task", re.compile(r"^task:([A-Za-z0-9_-]{1,64}):(\d{1,12})$")),
    ("inline", re.compile(r"^inline:([A-Za-z0-9_-]{1,64}):(\d{1,12})$")),  # small results
    ("job", re.compile(r"^job:([A-Za-z0-9_-]{1,64})$")),
    ("stage", re.compile(r"^stage:([A-Za-z0-9_-]{1,64})$")),
    ("pending", re.compile(r"^pending:([A-Za-z0-9_.-]{1,64})$")),
    ("worker", re.compile(r"^worker:([A-Za-z0-9_.-]{1,128})$")),
    ("held", re.compile(r"^held:([A-Za-z0-9_.-]{1,128})$")),
    ("app", re.compile(r"^app:([A-Za-z0-9_.-]{1,64}):(?:workers|fleet)$")),
    ("web", re.compile(r"^web:(?:session|fails):.+$")),
    # the gateway's worker tokens and their rate-limit windows
    ("gateway", re.compile(r"^(?:token:[0-9a-f]{64}|gw:rate:[0-9a-f]{64}:\d{1,12})$")),
    # placement: models held warm, owners with pending work and their queues of jobs
    ("placement", re.compile(r"^app:[A-Za-z0-9_.-]{1,64}:"
                             r"(?:warm|owners|owner:[A-Za-z0-9_.:@+/-]{0,128})$")),
    # verification: results awaiting it, identities' records and unverified results
    ("verification", re.compile(r"^(?:verify:[A-Za-z0-9_.-]{1,64}|"
                                r"(?:trust|unverified):[A-Za-z0-9_.-]{1,128})$")),
]
#: Task fields the checks read, in this order.
TASK_FIELDS = ("state", "worker", "b_worker")
#: Job fields the checks read, in this order.
JOB_FIELDS = ("state", "app", "total", "pending", "leased", "done", "failed", "cancelled",
              "verifying")


@dataclasses.dataclass
class KeyScan:
    """Every key of the namespace by kind: ids found in their names."""

    jobs: set[str] = dataclasses.field(default_factory=set)
    task_keys: Counter[str] = dataclasses.field(default_factory=Counter)  # job -> task keys
    stages: set[str] = dataclasses.field(default_factory=set)
    pending_apps: set[str] = dataclasses.field(default_factory=set)
    workers: set[str] = dataclasses.field(default_factory=set)
    held: set[str] = dataclasses.field(default_factory=set)
    app_sets: set[str] = dataclasses.field(default_factory=set)
    unknown: list[str] = dataclasses.field(default_factory=list)
    keys: int = 0


def scan_keys(r: redis.Redis, keys: Keyspace) -> KeyScan:
    """Classify every key of the namespace (``SCAN`` with its prefix; O(keys))."""
    out = KeyScan()
    prefix = keys.prefix
    for key in r.scan_iter(match=_glob_escape(prefix) + "*", count=1000):
        out.keys += 1
        name = key[len(prefix):]
        if name in SINGLETONS:
            continue
        for kind, pattern in SHAPES:
            m = pattern.match(name)
            if m:
                _add(out, kind, m)
                break
        else:
            out.unknown.append(key)
    return out


def _add(out: KeyScan, kind: str, m: re.Match[str]) -> None:
    if kind == "task":
        out.task_keys[m.group(1)] += 1
    elif kind not in ("web", "placement", "gateway", "inline", "verification"):
        {"job": out.jobs, "stage": out.stages, "pending": out.pending_apps,
         "worker": out.workers, "held": out.held, "app": out.app_sets}[kind].add(m.group(1))


def _glob_escape(text: str) -> str:
    """``text`` as a literal SCAN pattern (the braces of the hash tag are not special, but
    a namespace is checked to hold no glob character anyway)."""
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)


@dataclasses.dataclass(frozen=True)
class TaskRow:
    """One task as the checks see it: its fields and whether each set holds it."""

    tid: str
    state: str | None
    worker: str | None
    b_worker: str | None
    in_pending: bool
    in_leases: bool
    in_failed: bool
    held_by_worker: bool
    #: in its app's verify set (a result awaiting verification)
    in_verify: bool = False


def read_tasks(r: redis.Redis, keys: Keyspace, job_id: str, app: str,
               batch: int = 1000) -> Iterator[TaskRow]:
    """The job's tasks from index 0 up to the first missing one, 1,000 per round trip."""
    start = 0
    while True:
        tids = [f"{job_id}:{i}" for i in range(start, start + batch)]
        pipe = r.pipeline(transaction=False)
        for tid in tids:
            pipe.hmget(keys.task(tid), TASK_FIELDS)
        pipe.zmscore(keys.pending(app), tids)
        pipe.zmscore(keys.leases(), tids)
        pipe.zmscore(keys.failed(), tids)
        pipe.zmscore(keys.verify(app), tids)
        res = pipe.execute()
        fields, pending, leases, failed = res[:batch], res[batch], res[batch + 1], res[batch + 2]
        verify = res[batch + 3]
        rows = []
        for i, tid in enumerate(tids):
            state, worker, b_worker = fields[i]
            if state is None and worker is None and b_worker is None:
                yield from _with_held(r, keys, rows)
                return
            rows.append((tid, state, worker, b_worker, pending[i] is not None,
                         leases[i] is not None, failed[i] is not None, verify[i] is not None))
        yield from _with_held(r, keys, rows)
        start += batch


def _with_held(r: redis.Redis, keys: Keyspace, rows: list[tuple]) -> Iterator[TaskRow]:
    pipe = r.pipeline(transaction=False)
    for tid, state, worker, *_ in rows:
        if state == "leased" and worker:
            pipe.sismember(keys.held(worker), tid)
    held = iter(pipe.execute()) if len(pipe) else iter(())
    for tid, state, worker, b_worker, in_pending, in_leases, in_failed, in_verify in rows:
        is_held = bool(next(held)) if state == "leased" and worker else False
        yield TaskRow(tid, state, worker, b_worker, in_pending, in_leases, in_failed, is_held,
                      in_verify)
