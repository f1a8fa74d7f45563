"""The worker's claim state (nova_queue.workers.claims.Claims) against a real Redis: what it
claims next, answers prefetched by a commit, attempt ids in doubt after a lost reply, and
the --max-tasks budget."""

from __future__ import annotations

import hashlib
import threading
import urllib.parse

import pytest
import redis
from novatests.chaos.proxy import CutProxy

from nova_queue import NovaClient, TaskSpec
from nova_queue.apps.base import AppSpec
from nova_queue.local import wait_for
from nova_queue.models import ClaimResult
from nova_queue.scripts import script_sources
from nova_queue.workers.apps import AppRunner, WorkerApp, load_worker_app
from nova_queue.workers.claims import COVER_CALLS, Claims, NextClaim


class SizedSpec(AppSpec):
    name = "synthetic"  # claims go to the synthetic queue

    def parse_params(self, raw):
        return {"k": int(raw.get("k", 2))}


class SizedRunner(AppRunner):
    """Batch size from the job's params, as txt2img sizes batches from image size."""

    def setup(self, ctx):
        pass

    def batch_size(self, params):
        return params["k"]

    def run_batch(self, tasks):
        raise AssertionError("not run here")

    def benchmark_task(self):
        return "x", self.spec.parse_params({})


def sized() -> dict[str, WorkerApp]:
    spec = SizedSpec()
    return {"synthetic": WorkerApp(spec, SizedRunner(spec))}


def make(nova: NovaClient, apps=None, *, max_tasks=None, stop=None) -> Claims:
    nova.register_worker("w", {"name": "w"}, ["synthetic"])
    stop = stop or threading.Event()
    return Claims(nova, "w", apps or {"synthetic": load_worker_app("synthetic")},
                  max_tasks=max_tasks, stopping=stop.is_set)


def test_next_claim_sizes_from_the_last_params_within_max_tasks(nova):
    claims = make(nova, sized(), max_tasks=10)
    plan = claims.next_claim("synthetic", committed=0)
    assert isinstance(plan, NextClaim) and len(plan.attempt_ids) == 2  # defaults: k=2
    claims.note_params("synthetic", {"k": "5"})
    assert len(claims.next_claim("synthetic", 0).attempt_ids) == 5
    assert len(set(claims.next_claim("synthetic", 0).attempt_ids)) == 5  # fresh, distinct
    claims.settle(7, None, None)
    # done 7 + this run's 1 + the committing one = 9 of 10: one task left to claim
    assert len(claims.next_claim("synthetic", committed=1).attempt_ids) == 1
    assert claims.next_claim("synthetic", committed=2) is None  # the 10th commit: no claim
    assert not claims.reached_max()
    claims.settle(3, None, None)
    assert claims.reached_max() and claims.done == 10


def test_cheap_tasks_are_claimed_to_cover_a_few_commit_calls_within_max_tasks(nova):
    claims = make(nova, sized(), max_tasks=100)
    assert claims.cheap_k("synthetic") == 1  # nothing measured yet: the batch size (2)
    assert len(claims.next_claim("synthetic", 0).attempt_ids) == 2
    claims.note_timing("synthetic", 10, 0.010, 1, 0.002)  # 1 ms per task, 2 ms per call
    assert claims.cheap_k("synthetic") == COVER_CALLS * 2
    assert len(claims.next_claim("synthetic", 0).attempt_ids) == COVER_CALLS * 2
    for _ in range(30):  # no-op tasks (the averages follow): at most 64
        claims.note_timing("synthetic", 1, 0.0, 1, 0.002)
    assert claims.cheap_k("synthetic") == 64
    claims.settle(90, None, None)  # 90 + this run's 1 + the committing one: 8 left
    assert len(claims.next_claim("synthetic", 1).attempt_ids) == 8
    for _ in range(40):  # tasks of a second: one at a time again (the batch size)
        claims.note_timing("synthetic", 1, 1.0, 1, 0.002)
    assert claims.cheap_k("synthetic") == 1
    assert len(claims.next_claim("synthetic", 0).attempt_ids) == 2


def test_no_combined_claim_while_stopping_or_with_ids_in_doubt(nova):
    stop = threading.Event()
    claims = make(nova, stop=stop)
    assert claims.next_claim("synthetic", 0) is not None
    claims.settle(0, None, NextClaim("synthetic", ("aaaa", "bbbb")))
    assert claims.next_claim("synthetic", 0) is None  # the ids in doubt go first
    stop.set()
    assert make(nova, stop=stop).next_claim("synthetic", 0) is None


def test_a_prefetched_answer_is_used_without_asking_redis(nova):
    claims = make(nova)
    answer = ClaimResult("wait", [], retry_after_s=1.5)
    claims.settle(1, ("synthetic", answer), None)
    assert claims.claim("synthetic") is answer and claims.done == 1
    # once taken, the next claim asks Redis (an empty queue)
    assert claims.claim("synthetic").status == "empty"


def test_a_lost_claim_reply_is_asked_again_with_the_same_attempt_ids(redis_url, namespace,
                                                                      nova):
    """The claim ran but its reply was lost and Redis stayed unreachable past redis-py's
    own retries: the next claim sends the same attempt ids and gets the lease it made."""
    proxy = CutProxy(urllib.parse.urlsplit(redis_url).port)
    via = NovaClient.from_url(proxy.url, namespace=namespace)
    try:
        for _, source in script_sources().values():  # EVALSHA runs at once, no NOSCRIPT
            nova.redis.script_load(source)
        job = nova.enqueue("synthetic", [TaskSpec("one", 0.01), TaskSpec("two", 0.01)])
        claims = make(via, apps=sized())
        claims.note_params("synthetic", {"k": "1"})
        sha = hashlib.sha1(script_sources()["claim"][1].encode()).hexdigest().encode()
        proxy.arm(sha, down_s=3.0)
        with pytest.raises(redis.RedisError):
            claims.claim("synthetic")
        assert proxy.cuts == 1


        def claim_again() -> ClaimResult | None:
            try:
                return claims.claim("synthetic")
            except redis.RedisError:  # still down: the ids stay in doubt
                return None

        (lease,) = wait_for(claim_again, timeout_s=30, message="a claim after the outage").leases
        tasks = nova.tasks(job)
        assert [t.state for t in tasks] == ["leased", "pending"]
        assert (tasks[0].attempt_id, tasks[0].attempt_count) == (lease.attempt_id, 1)
        claimed = [e for e in nova.events(count=1000) if e.type == "claimed"]
        assert len(claimed) == 1  # the retry made no second lease
    finally:
        via.close()
        proxy.close()
