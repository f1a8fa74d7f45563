"""NovaClient is composed of parts by concept (``nova_queue/client/``), not a mixin chain: each
public call is a part's method, bound on the client; the parts share one connection,
keyspace, settings and caller; and the public calls are those the CLI, the gallery, the
gateway, the workers and the benchmarks have always used."""

from __future__ import annotations

import inspect

import pytest
import redis

from nova_queue.client import CALLS, NovaClient
from nova_queue.client.part import Part
from nova_queue.errors import InputError

#: every public call of NovaClient (besides from_settings, from_url and close)
PUBLIC_CALLS = {
    "apps", "cancel", "claim", "complete", "complete_and_claim", "complete_batch",
    "deregister_worker", "eligible_workers", "enqueue", "events", "expire", "fail",
    "failed_tasks", "finished_before", "is_expired", "job", "jobs", "last_event_id",
    "live_apps", "missing_job", "note_loaded", "note_loading", "pending_count", "purge",
    "reap", "recent_events", "register_worker", "renew", "retry", "server_time_ms",
    "set_quarantine", "staging_job", "sweep", "sweep_after_enqueue", "task", "tasks",
    "tombstone", "unmet_requirement", "who_can_run", "worker_labels", "workers",
}


def test_the_public_calls_are_the_parts_methods_bound_on_the_client():
    client = NovaClient(redis.Redis(), namespace="parts")
    bound = {name: part for part, names in CALLS.items() for name in names}
    assert set(bound) == PUBLIC_CALLS and sum(map(len, CALLS.values())) == len(PUBLIC_CALLS)
    for name, part in bound.items():
        call = getattr(client, name)
        assert call.__self__ is getattr(client, part), name
        unbound = getattr(type(call.__self__), name)
        assert inspect.signature(call) == inspect.signature(unbound.__get__(call.__self__))


def test_the_parts_share_one_state_and_none_inherits_another():
    client = NovaClient(redis.Redis(), namespace="parts")
    parts = [getattr(client, part) for part in CALLS]
    for part in parts:
        assert isinstance(part, Part) and type(part).__mro__ == (type(part), Part, object)
        assert part.caller is client.caller and part.keys is client.keys
        assert part.redis is client.redis and part.settings is client.settings
    assert client.batch.worker is client.worker
    assert client.producer.retention is client.reader.retention is client.retention


def test_every_bad_input_answer_is_an_input_error_from_the_caller(nova):
    """Every script answers ``{BAD_INPUT, message}`` before it writes; the caller raises it."""
    with pytest.raises(InputError, match="^cancel: "):
        nova.caller.run("cancel", [nova.keys.job("j"), nova.keys.pending("a"),
                                   nova.keys.finished(), nova.keys.events(), nova.keys.meta()],
                        [nova.prefix, "j", 0, 10**12, 1000])
