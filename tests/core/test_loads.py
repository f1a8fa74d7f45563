"""A worker's model load is recorded while it runs (``loading-4.lua``: ``loading:<app>``,
``model_loading``), ended by ``loaded-4.lua`` or a stop, and read back as "loading model on
w1 (12 s)" for a job of that model (:mod:`nova_queue.loads`) — only while the worker is
live, busy and still holds that model, so a failed load left behind says nothing."""

from __future__ import annotations

from novatests.leases import join

from nova_queue import TaskSpec
from nova_queue.loads import loading_note, loading_workers


def claim_model_job(nova, wid: str, model: str = "model-a") -> tuple[str, object]:
    job = nova.enqueue("synthetic", [TaskSpec("p", 1.0), TaskSpec("q", 1.0)], model=model)
    [lease] = nova.claim(wid, "synthetic").leases  # the claim marks it warm and busy
    return job, lease


def test_a_load_in_progress_reads_as_loading(nova):
    join(nova, "w1")
    claim_model_job(nova, "w1")
    assert loading_note(nova, "synthetic", "model-a") == ""  # not loading yet
    started = nova.note_loading("w1", "synthetic", "model-a")
    assert started > 0
    nova.redis.hset(nova.keys.worker("w1"), "loading:synthetic", started - 12_300)  # 12 s ago
    [found] = loading_workers(nova, "synthetic", "model-a")
    assert found.name == "w1" and 12 <= found.seconds < 30
    assert loading_note(nova, "synthetic", "model-a").startswith("loading model on w1 (1")
    assert loading_note(nova, "synthetic", "model-b") == ""  # another model's job
    assert loading_note(nova, "synthetic", "") == ""  # a job without a model
    event = nova.events(count=100)[-1]
    assert event.type == "model_loading" and event.fields["model"] == "model-a"
    # the load is done: no longer loading
    nova.note_loaded("w1", "synthetic", "model-a", 12.3)
    assert not nova.redis.hexists(nova.keys.worker("w1"), "loading:synthetic")
    assert loading_note(nova, "synthetic", "model-a") == ""


def test_a_stop_or_a_failed_load_ends_it(nova):
    join(nova, "w1")
    join(nova, "w2")
    _, lease = claim_model_job(nova, "w1")
    nova.note_loading("w1", "synthetic", "model-a")
    nova.note_loading("w1", "synthetic", "model-a", start=False)  # prepare loaded nothing
    assert loading_note(nova, "synthetic", "model-a") == ""
    nova.note_loading("w1", "synthetic", "model-a")
    nova.fail("w1", lease, "error", "the model would not load")  # left behind, but idle
    assert nova.redis.hexists(nova.keys.worker("w1"), "loading:synthetic")
    assert loading_note(nova, "synthetic", "model-a") == ""
    # two loading at once: the longest first, and how many more
    [lease2] = nova.claim("w2", "synthetic").leases
    [lease1] = nova.claim("w1", "synthetic").leases
    started = nova.note_loading("w2", "synthetic", "model-a")
    nova.redis.hset(nova.keys.worker("w2"), "loading:synthetic", started - 5000)  # sooner
    nova.note_loading("w1", "synthetic", "model-a")
    assert loading_note(nova, "synthetic", "model-a").startswith("loading model on w2 and 1 more")
    nova.deregister_worker("w2")  # a worker that left is not loading
    assert loading_note(nova, "synthetic", "model-a").startswith("loading model on w1 (")
    assert lease1 and lease2
