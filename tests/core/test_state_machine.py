"""Hypothesis stateful test of the task state machine against a real Redis.

Random interleavings of claim, complete (current and stale leases), fail, lease expiry,
worker loss, renew and cancel. After every step: a task is committed at most once and
its result never changes, lease_gen never goes down, the job's counters equal the
states of its tasks, and the pending and lease indexes agree with the task hashes.
"""

import uuid

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from novatests.seed import expire_lease, expire_worker

from nova_queue import NovaClient, TaskSpec
from nova_queue.errors import JobCancelledError, StaleResultError
from nova_queue.keys import result_key

WORKERS = ["w0", "w1", "w2"]
APP = "synthetic"


class TaskMachine(RuleBasedStateMachine):
    redis_url = ""

    @initialize(n=st.integers(1, 8), max_attempts=st.integers(1, 3))
    def setup(self, n, max_attempts):
        self.nova = NovaClient.from_url(self.redis_url, namespace=f"sm-{uuid.uuid4().hex[:10]}")
        self.job = self.nova.enqueue(APP, [TaskSpec(f"p{i}") for i in range(n)],
                                     max_attempts=max_attempts)
        self.n = n
        for w in WORKERS:
            self.nova.register_worker(w, {"name": w}, [APP])
        self.alive = set(WORKERS)
        self.history = []  # every lease ever granted: (worker, lease)
        self.current = {}  # tid -> (worker, lease) believed current
        self.committed = {}  # tid -> result key
        self.max_gen = {}
        self.cancelled = False

    def teardown(self):
        if hasattr(self, "nova"):
            for key in self.nova.redis.scan_iter(match=self.nova.prefix + "*", count=1000):
                self.nova.redis.delete(key)
            self.nova.close()

    def _drop_current_not_leased(self):
        for tid in list(self.current):
            if self.nova.redis.hget(self.nova.keys.task(tid), "state") != "leased":
                del self.current[tid]

    @rule(w=st.sampled_from(WORKERS), k=st.integers(1, 3))
    def claim(self, w, k):
        if w not in self.alive:
            self.nova.register_worker(w, {"name": w}, [APP])
            self.alive.add(w)
        res = self.nova.claim(w, APP, k)
        self._drop_current_not_leased()
        for lease in res.leases:
            assert lease.task_id not in self.current, "a task was leased twice"
            assert not self.cancelled
            self.current[lease.task_id] = (w, lease)
            self.history.append((w, lease))

    @precondition(lambda self: self.history)
    @rule(data=st.data(), as_other=st.booleans())
    def complete(self, data, as_other):
        w, lease = data.draw(st.sampled_from(self.history))
        if as_other:
            w = WORKERS[(WORKERS.index(w) + 1) % len(WORKERS)]
        expected = self.current.get(lease.task_id) == (w, lease) and not self.cancelled
        key = result_key(lease.job_id, lease.index, lease.lease_gen, lease.attempt_id, "png")
        try:
            res = self.nova.complete(w, lease, key, run_s=1.0, warm=True)
            accepted = not res.replayed
        except (StaleResultError, JobCancelledError):
            accepted = False
        assert accepted == expected
        if accepted:
            assert lease.task_id not in self.committed
            self.committed[lease.task_id] = key
            del self.current[lease.task_id]
        self._drop_current_not_leased()

    @precondition(lambda self: any(self.current.get(l.task_id) != (w, l) for w, l in self.history))
    @rule(data=st.data())
    def complete_stale(self, data):
        stale = [(w, l) for w, l in self.history if self.current.get(l.task_id) != (w, l)]
        w, lease = data.draw(st.sampled_from(stale[-4:]))
        before = self.nova.redis.hgetall(self.nova.keys.task(lease.task_id))
        try:
            res = self.nova.complete(w, lease, "stale-result", run_s=1.0, warm=True)
            assert res.replayed, "a stale completion was accepted"
        except (StaleResultError, JobCancelledError):
            pass
        after = self.nova.redis.hgetall(self.nova.keys.task(lease.task_id))
        if before.get("state") == "done":
            assert after == before

    @precondition(lambda self: self.current)
    @rule(data=st.data(), kind=st.sampled_from(["error", "oom", "shutdown"]))
    def fail(self, data, kind):
        tid = data.draw(st.sampled_from(sorted(self.current)))
        w, lease = self.current[tid]
        self.nova.fail(w, lease, kind, "boom")
        del self.current[tid]

    @precondition(lambda self: self.current)
    @rule(data=st.data())
    def expire(self, data):
        tid = data.draw(st.sampled_from(sorted(self.current)))
        expire_lease(self.nova, tid)
        self.nova.reap()
        self._drop_current_not_leased()
        assert tid not in self.current

    @rule(w=st.sampled_from(WORKERS))
    def lose_worker(self, w):
        expire_worker(self.nova, w)
        self.nova.reap()
        self.alive.discard(w)
        self._drop_current_not_leased()
        assert all(owner != w for owner, _ in self.current.values())

    @rule(w=st.sampled_from(WORKERS))
    def renew(self, w):
        mine = [lease for owner, lease in self.current.values() if owner == w]
        res = self.nova.renew(w, mine)
        if w in self.alive and not self.cancelled:
            assert res.lost == []
        else:
            assert set(res.lost) >= ({lease.task_id for lease in mine} if res.worker_lost else set())

    @precondition(lambda self: not self.cancelled)
    @rule()
    def cancel(self):
        state = self.nova.job(self.job, with_tasks=False).state
        if state not in ("done", "failed"):  # a finished job cannot be cancelled
            self.nova.cancel(self.job)
            self.cancelled = True

    @invariant()
    def consistent(self):
        if not hasattr(self, "nova"):
            return
        st_ = self.nova.job(self.job)
        states = [t.state for t in st_.tasks]
        for t in st_.tasks:
            assert t.lease_gen >= self.max_gen.get(t.task_id, 0), "lease_gen went down"
            self.max_gen[t.task_id] = t.lease_gen
            if t.task_id in self.committed:
                assert t.state == "done" and t.result == self.committed[t.task_id]
            if t.state == "done":
                assert t.task_id in self.committed, "a commit nobody made"
        assert (st_.pending, st_.leased, st_.done, st_.failed, st_.cancelled) == (
            states.count("pending"), states.count("leased"), states.count("done"),
            states.count("failed"), states.count("cancelled"))
        assert len(states) == self.n
        k = self.nova.keys
        pending = set(self.nova.redis.zrange(k.pending(APP), 0, -1))
        assert pending == {t.task_id for t in st_.tasks if t.state == "pending"}
        leases = set(self.nova.redis.zrange(k.leases(), 0, -1))
        assert leases == {t.task_id for t in st_.tasks if t.state == "leased"}
        if st_.pending + st_.leased == 0:  # finished: cancelled, else failed unless one is done
            assert st_.state == ("cancelled" if self.cancelled else "done" if st_.done
                                 else "failed") and st_.finished_ms is not None
        inflight = int(self.nova.redis.hget(k.inflight(), APP) or 0)
        assert inflight == st_.leased


def test_task_state_machine(redis_url):
    TaskMachine.redis_url = redis_url
    run = TaskMachine.TestCase
    run.settings = settings(max_examples=100, stateful_step_count=50, deadline=None,
                            suppress_health_check=list(HealthCheck))
    run().runTest()
