"""What a worker says about itself: a model load is recorded and logged while it runs
(``workers/loading.py``), and a worker let back from quarantine says it claims again (it
used to keep saying only "quarantined" until it next failed)."""

from __future__ import annotations

import logging
import threading

import pytest

from nova_queue import TaskSpec
from nova_queue.local import wait_for
from nova_queue.workers import loading
from nova_queue.workers.apps import load_worker_app
from nova_queue.workers.claims import Claims
from nova_queue.workers.loading import ModelLoads


def loading_field(nova, wid="w"):
    return nova.redis.hget(nova.keys.worker(wid), "loading:synthetic")


def test_a_load_is_recorded_and_logged_while_it_runs(nova, caplog, monkeypatch):
    monkeypatch.setattr(loading, "PROGRESS_EVERY_S", 0.05)
    nova.register_worker("w", {"name": "w"}, ["synthetic"])
    loads = ModelLoads(nova, "w", "synthetic")
    with caplog.at_level(logging.INFO, logger="nova_queue.workers.loading"):
        with loads.preparing("model-a", "job1") as prep:
            assert loading_field(nova)  # recorded before the load
            wait_for(lambda: "still loading model model-a for job job1" in caplog.text,
                     timeout_s=10, message="a progress line while it loads")
            prep.loaded = True
        loads.record("model-a", 1.5)
    assert "synthetic: loading model model-a for job job1" in caplog.text
    assert loading_field(nova) is None and loads.warm == "model-a"
    assert nova.redis.hget(nova.keys.worker("w"), "warm:synthetic") == "model-a"
    # the same model again: nothing to record, and a slow prepare is still said
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="nova_queue.workers.loading"), \
            loads.preparing("model-a", "job2"):
        assert loading_field(nova) is None
        wait_for(lambda: "still preparing for job job2" in caplog.text, timeout_s=10,
                 message="a progress line while it prepares")
    assert "loading model" not in caplog.text


def test_a_prepare_that_loads_nothing_or_fails_takes_the_record_back(nova):
    nova.register_worker("w", {"name": "w"}, ["synthetic"])
    loads = ModelLoads(nova, "w", "synthetic")
    with loads.preparing("model-b", "job1"):
        assert loading_field(nova)
    assert loading_field(nova) is None  # it held the model already
    with pytest.raises(RuntimeError), loads.preparing("model-c", "job2"):
        assert loading_field(nova)
        raise RuntimeError("the model is broken")
    assert loading_field(nova) is None and loads.warm == "model-b"


def test_a_released_worker_says_it_claims_again(nova, caplog):
    nova.register_worker("w", {"name": "w"}, ["synthetic"])
    nova.enqueue("synthetic", [TaskSpec("p", 1.0)])
    claims = Claims(nova, "w", {"synthetic": load_worker_app("synthetic")},
                    max_tasks=None, stopping=threading.Event().is_set)
    nova.set_quarantine("w", True, reason="testing")
    with caplog.at_level(logging.INFO, logger="nova_queue.workers.claims"):
        assert claims.claim("synthetic").status == "quarantined"
        assert "quarantined: claims refused (by an admin: testing)" in caplog.text
        nova.set_quarantine("w", False)
        assert claims.claim("synthetic").status == "ok"
    assert "claims are no longer refused: the quarantine was lifted" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="nova_queue.workers.claims"):
        claims.claim("synthetic")  # said once, not at every claim
    assert "no longer refused" not in caplog.text


def test_progress_lines_take_one_thread_however_many_blocks(caplog, monkeypatch):
    """A worker enters a prepare block per batch (hundreds a second for small tasks): the
    blocks share one progress thread, and each still says it runs while it does."""
    monkeypatch.setattr(loading, "PROGRESS_EVERY_S", 0.05)
    for i in range(200):
        with loading.still_running("synthetic", f"preparing batch {i}"):
            pass
    ticking = [t for t in threading.enumerate() if t.name == "nova-progress"]
    assert len(ticking) == 1
    with caplog.at_level(logging.INFO, logger="nova_queue.workers.loading"), \
            loading.still_running("synthetic", "preparing the slow one"), \
            loading.still_running("other", "loading its model"):
        wait_for(lambda: "synthetic: still preparing the slow one" in caplog.text
                 and "other: still loading its model" in caplog.text, timeout_s=10,
                 message="a progress line for each block that runs")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="nova_queue.workers.loading"):
        with loading.still_running("synthetic", "quick"):
            pass
        threading.Event().wait(0.2)  # an observation window of 4 intervals, not a sync
    assert "still quick" not in caplog.text  # a finished block says nothing more
