"""The typed client: one namespace of one Redis, composed of parts by concept.

Every state change is one Lua script, run by the client's one :class:`Caller`
(``client/caller.py``). The parts, each an object holding the shared connection, keys,
settings and caller (``client/part.py``):

- ``producer`` (``producer.py``): enqueue, cancel, retry;
- ``reader`` (``reader.py``): jobs, tasks, events, pending counts, Redis's clock;
- ``worker`` (``worker.py``): the fenced calls a worker makes (register, claim, renew,
  complete, complete with the next claim, fail, model loads, deregister) and reap;
- ``batch`` (``batch.py``): the batched commit, on top of the worker's key lists and claims;
- ``fleet`` (``fleet.py``): the registered workers, who can run an app, quarantine;
- ``retention`` (``retention.py``): the retention sweep, purge, tombstones.

:class:`NovaClient`'s public calls are the parts' methods, bound by :data:`CALLS`: the
client adds no layer to a hot call (``claim`` is ``client.worker.claim``)."""

from __future__ import annotations

from typing import Any

import redis

from nova_queue.client.batch import BatchCalls, BatchCommit, BatchResult
from nova_queue.client.caller import Caller
from nova_queue.client.fleet import Fleet
from nova_queue.client.producer import ENQUEUE_CHUNK, Producer, new_job_id
from nova_queue.client.reader import Reader
from nova_queue.client.retention import Retention
from nova_queue.client.worker import WorkerCalls
from nova_queue.connection import connect
from nova_queue.keys import Keyspace
from nova_queue.scripts import Scripts
from nova_queue.settings import Settings

__all__ = ["CALLS", "ENQUEUE_CHUNK", "BatchCommit", "BatchResult", "Caller", "NovaClient",
           "new_job_id"]

#: NovaClient's public calls, by the part that makes them (``client.<part>.<call>``).
CALLS: dict[str, tuple[str, ...]] = {
    "producer": ("enqueue", "cancel", "retry"),
    "reader": ("job", "staging_job", "tasks", "task", "jobs", "failed_tasks", "pending_count",
               "apps", "events", "recent_events", "last_event_id", "server_time_ms"),
    "worker": ("register_worker", "deregister_worker", "claim", "renew", "complete",
               "complete_and_claim", "fail", "note_loaded", "note_loading", "reap"),
    "batch": ("complete_batch",),
    "fleet": ("workers", "eligible_workers", "who_can_run", "worker_labels",
              "unmet_requirement", "live_apps", "set_quarantine"),
    "retention": ("expire", "sweep", "sweep_after_enqueue", "purge", "finished_before",
                  "is_expired", "tombstone", "missing_job"),
}


class NovaClient:
    """One namespace of one Redis; thread-safe (redis-py pools connections).

    ``redis``, ``keys`` (:class:`~nova_queue.keys.Keyspace`), ``prefix``, ``settings``,
    ``scripts`` and ``caller`` are shared by its parts; every call of :data:`CALLS` is the
    method of its part, bound here."""

    def __init__(self, client: redis.Redis, *, settings: Settings | None = None,
                 namespace: str | None = None):
        self.settings = settings or Settings()
        if namespace is not None and namespace != self.settings.namespace:
            self.settings = Settings(**{**self.settings.__dict__, "namespace": namespace})
        self.redis = client
        self.keys = Keyspace(self.settings.namespace)
        self.prefix = self.keys.prefix
        self.scripts = Scripts(client)
        self.caller = Caller(self.scripts, self.settings.namespace)
        shared = (client, self.keys, self.settings, self.caller)
        self.retention = Retention(*shared)
        self.producer = Producer(*shared, self.retention)
        self.reader = Reader(*shared, self.retention)
        self.worker = WorkerCalls(*shared)
        self.batch = BatchCalls(*shared, self.worker)
        self.fleet = Fleet(*shared)
        for part, names in CALLS.items():
            bound = getattr(self, part)
            for name in names:
                setattr(self, name, getattr(bound, name))

    @classmethod
    def from_settings(cls, settings: Settings) -> NovaClient:
        """Connect to ``settings.redis_url``."""
        return cls(connect(settings.redis_url), settings=settings)

    @classmethod
    def from_url(cls, url: str, namespace: str = "default", **settings: Any) -> NovaClient:
        """Connect to ``url`` with default settings."""
        s = Settings(redis_url=url, namespace=namespace, **settings)
        return cls(connect(url), settings=s)

    def close(self) -> None:
        """Close the connection pool."""
        self.redis.close()
