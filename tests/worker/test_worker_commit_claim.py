"""The worker's last commit of a claim also claims its next tasks (complete_claim-15): one
round trip per task; the results of a run of cheap tasks go in one complete_batch-12 call,
and the worker claims more of them at a time. In-process worker on a real Redis; the client is wrapped only to
count which calls the worker made (every call still goes to Redis)."""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import logging
import threading
import urllib.parse

import pytest
from novatests.chaos.proxy import CutProxy
from novatests.seed import set_speed

from nova_queue import NovaClient, TaskSpec
from nova_queue.limits import MAX_CLAIM_K, MAX_INPUT_BYTES
from nova_queue.local import wait_for
from nova_queue.scripts import script_sources
from nova_queue.settings import Settings
from nova_queue.stores import open_store
from nova_queue.workers.runtime import Worker, WorkerOptions


@pytest.fixture
def make_worker(redis_url, namespace, tmp_path):
    made: list[Worker] = []

    def make(url: str = redis_url, **options) -> tuple[Worker, NovaClient, collections.Counter]:
        settings = Settings(redis_url=url, namespace=namespace, home=str(tmp_path),
                            store_url=(tmp_path / "store").as_uri())
        worker = Worker(settings, WorkerOptions(apps=("synthetic",), benchmark=False,
                                                device_score_s=0, **options))
        calls: collections.Counter = collections.Counter()
        client = worker.client
        for name in ("claim", "complete", "complete_and_claim", "complete_batch"):
            real = getattr(client, name)

            def counted(*args, _real=real, _name=name, **kwargs):
                calls[_name] += 1
                return _real(*args, **kwargs)

            setattr(client, name, counted)
        made.append(worker)
        direct = dataclasses.replace(settings, redis_url=redis_url)
        return worker, NovaClient.from_settings(direct), calls

    yield make
    for worker in made:
        worker.stop()


def run_loop(worker: Worker, timeout_s: float = 60, before=None) -> None:
    worker.setup()
    if before is not None:
        before()
    loop = threading.Thread(target=worker._loop, daemon=True)
    loop.start()
    loop.join(timeout_s)
    assert not loop.is_alive(), "worker loop did not finish in time"
    worker._shutdown()


def test_every_commit_also_claims_the_next_task(make_worker):
    worker, nova, calls = make_worker(burst=True)
    job = nova.enqueue("synthetic", [TaskSpec(f"p{i}", 0.02) for i in range(12)],
                       params={"seconds": 0.02})
    run_loop(worker)
    assert nova.job(job, with_tasks=False).done == 12
    # one plain claim to start; then each commit claimed the next task (the last one
    # found the queue empty, which ended the --burst worker)
    assert calls == {"claim": 1, "complete_and_claim": 12}


def test_cheap_tasks_are_claimed_many_at_a_time_and_committed_in_one_call(make_worker):
    """Runs measured as far cheaper than a commit call (seeded: a synthetic task with its
    card and upload takes some 10 ms here, k stays 1 for it) claim up to 64 tasks, and
    their results go in one complete_batch call; k follows the measured times after."""
    worker, nova, calls = make_worker(burst=True)
    job = nova.enqueue("synthetic", [TaskSpec(f"p{i}", 0.001) for i in range(150)],
                       params={"seconds": 0, "size": 64})

    def seed() -> None:
        set_speed(nova, worker.worker_id, "synthetic", 0.01)  # measured: claims grant k
        worker.claims.note_timing("synthetic", 100, 0.01, 1, 0.01)

    run_loop(worker, before=seed)
    st = nova.job(job)
    assert (st.done, st.state) == (150, "done")
    assert {t.attempt_count for t in st.tasks} == {1}
    assert calls["complete_batch"] > 0, calls
    commits = calls["complete"] + calls["complete_and_claim"] + calls["complete_batch"]
    assert commits < 150, calls
    assert nova.redis.scard(nova.keys.held(worker.worker_id)) == 0
    assert nova.redis.hget(nova.keys.inflight(), "synthetic") == "0"
    assert int(nova.redis.hget(nova.keys.worker(worker.worker_id), "tasks_done")) == 150


def test_a_full_run_commits_and_claims_in_one_call(make_worker):
    """A run of the most tasks a claim takes (64) commits them in one complete_batch call
    that also claims the next run's: the worker asks with a plain claim only once (the
    64th result used to be committed on its own, and a plain claim followed every run)."""
    worker, nova, calls = make_worker(burst=True)
    job = nova.enqueue("synthetic", [TaskSpec(f"p{i}", 0.001) for i in range(4 * MAX_CLAIM_K)],
                       params={"seconds": 0, "size": 64})
    claimed: list[int] = []
    batch = worker.client.complete_batch

    def noted(*args, **kwargs):
        out = batch(*args, **kwargs)
        claimed.append(len(out.claimed.leases) if out.claimed else 0)
        return out

    def seed() -> None:
        set_speed(nova, worker.worker_id, "synthetic", 0.01)
        worker.claims.note_timing("synthetic", 100, 0.01, 1, 0.01)

    worker.client.complete_batch = noted
    run_loop(worker, before=seed)
    assert nova.job(job, with_tasks=False).done == 4 * MAX_CLAIM_K
    assert MAX_CLAIM_K in claimed, claimed  # full runs were claimed by a commit
    assert calls["claim"] == 1, (calls, claimed)


def test_max_tasks_stops_claiming_at_the_limit(make_worker):
    worker, nova, calls = make_worker(max_tasks=3)
    job = nova.enqueue("synthetic", [TaskSpec(f"p{i}", 0.02) for i in range(10)],
                       params={"seconds": 0.02})
    run_loop(worker)
    st = nova.job(job, with_tasks=False)
    assert (st.done, st.leased, st.pending) == (3, 0, 7)
    assert calls["complete"] == 1  # the third commit claims nothing more
    assert nova.redis.scard(nova.keys.held(worker.worker_id)) == 0


def test_leases_claimed_with_the_last_commit_are_released_on_stop(make_worker):
    worker, nova, calls = make_worker()
    job = nova.enqueue("synthetic", [TaskSpec(f"p{i}", 0.02) for i in range(5)],
                       params={"seconds": 0.02})
    combined = worker.client.complete_and_claim

    def then_stop(*args, **kwargs):  # SIGTERM arrives just after the combined call
        out = combined(*args, **kwargs)
        worker.stop()
        return out

    worker.client.complete_and_claim = then_stop
    run_loop(worker)
    st = nova.job(job)
    assert (st.done, st.leased, st.pending) == (1, 0, 4)
    # the task claimed with that commit went back without using an attempt
    assert [t.attempt_count for t in st.tasks] == [1, 0, 0, 0, 0]
    assert calls["complete_and_claim"] == 1


def test_a_stop_while_a_commit_is_retried_keeps_the_object_and_ends_the_retry(
        make_worker, redis_url, caplog):
    """The commit's reply is lost and Redis stays unreachable (a proxy that cuts the reply
    and then refuses connections for a minute): a stop request ends the retries at once
    instead of after COMMIT_RETRY_S, and the uploaded object is kept (the commit may have
    run, as here)."""
    proxy = CutProxy(urllib.parse.urlsplit(redis_url).port)
    worker, nova, _ = make_worker(url=proxy.url)
    try:
        for _, source in script_sources().values():  # EVALSHA runs at once, no NOSCRIPT
            nova.redis.script_load(source)
        job = nova.enqueue("synthetic", [TaskSpec("p0", 0.002), TaskSpec("p1", 0.002)],
                           params={"seconds": 0.002})
        sha = hashlib.sha1(script_sources()["complete_claim"][1].encode()).hexdigest()
        proxy.arm(sha.encode(), down_s=600)
        worker.setup()
        loop = threading.Thread(target=worker._loop, daemon=True)
        with caplog.at_level(logging.WARNING, logger="nova_queue.workers.execute"):
            loop.start()
            wait_for(lambda: "; retrying" in caplog.text, timeout_s=60,
                     message="the worker to retry its commit")
            worker.stop()
            loop.join(30)  # far less than the minute of outage left
            assert not loop.is_alive(), "a stop did not end the commit retries"
        assert "stopping: the commit of" in caplog.text and "unconfirmed" in caplog.text
        first = nova.task(f"{job}:0")  # the commit ran; only its reply was lost
        assert first.state == "done" and proxy.cuts == 1
        assert open_store(worker.settings.resolved_store_url).exists(first.result)
    finally:
        worker._shutdown()
        proxy.close()
        nova.close()


#: A prompt of the largest size a task takes: the synthetic app copies it into its result's
#: metadata, which the commit carries as provenance, over the scripts' 64 KiB limit; the
#: commit is refused (BAD_INPUT) before it writes anything.
REFUSED_PROMPT = "x" * MAX_INPUT_BYTES


def test_a_refused_commit_deletes_its_object_and_fails_only_its_task(make_worker):
    worker, nova, calls = make_worker(burst=True)
    job = nova.enqueue("synthetic", [TaskSpec(REFUSED_PROMPT, 0.002), TaskSpec("fine", 0.002)],
                       params={"seconds": 0.002}, max_attempts=1)
    run_loop(worker)
    refused, fine = nova.job(job).tasks
    assert (refused.state, fine.state) == ("failed", "done"), calls
    assert "its commit was refused" in refused.error and "provenance" in refused.error
    store = open_store(worker.settings.resolved_store_url)
    assert list(store.list(f"jobs/{job}/")) == [fine.result]  # the committed one stays


def test_a_refused_batch_is_committed_one_by_one(make_worker):
    """One refused commit refuses a batch whole (complete_batch checks every commit before
    writing): the worker commits that batch's results one by one, so only the refused one
    fails, and only its object is deleted."""
    worker, nova, calls = make_worker(burst=True)
    prompts = [f"p{i}" for i in range(100)]
    prompts[60] = REFUSED_PROMPT
    job = nova.enqueue("synthetic", [TaskSpec(p, 0.001) for p in prompts],
                       params={"seconds": 0, "size": 64}, max_attempts=1)

    def seed() -> None:
        set_speed(nova, worker.worker_id, "synthetic", 0.01)  # measured: claims grant k
        worker.claims.note_timing("synthetic", 100, 0.01, 1, 0.01)

    run_loop(worker, before=seed)
    st = nova.job(job)
    assert (st.done, st.failed) == (99, 1), calls
    assert st.tasks[60].state == "failed" and "provenance" in st.tasks[60].error
    assert calls["complete_batch"] > 0, calls
    store = open_store(worker.settings.resolved_store_url)
    assert sorted(store.list(f"jobs/{job}/")) == sorted(t.result for t in st.tasks
                                                        if t.state == "done")
