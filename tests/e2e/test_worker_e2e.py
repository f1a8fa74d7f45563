"""Real worker processes on a real Redis: failover, fencing and shutdown end to end."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys

import pytest
from novatests.procs import WorkerProc

from nova_queue import NovaClient, TaskSpec
from nova_queue.local import wait_for
from nova_queue.stores import open_store

pytestmark = pytest.mark.slow

# short leases so failover happens within seconds
FAST_LEASES = {"NOVA_LEASE_TTL_S": "2", "NOVA_HEARTBEAT_INTERVAL_S": "0.5"}


@pytest.fixture
def fleet(redis_url, namespace, tmp_path):
    procs: list[WorkerProc] = []
    store_url = (tmp_path / "store").as_uri()
    nova = NovaClient.from_url(redis_url, namespace=namespace, lease_ttl_s=2.0,
                               heartbeat_interval_s=0.5)

    def start(name, *args, env=None):
        p = WorkerProc(redis_url, namespace, store_url, tmp_path / "homes" / name, *args,
                       env={**FAST_LEASES, **(env or {})}, name=name)
        procs.append(p)
        return p

    start.nova = nova
    start.store = open_store(store_url)
    start.procs = procs
    yield start
    for p in procs:
        p.close()
    nova.close()


def committed_per_task(nova, job):
    counts = collections.Counter()
    for e in nova.events(count=100_000):
        if e.type == "completed" and e.fields["job"] == job:
            counts[int(e.fields["task"])] += 1
    return counts


def worker_by_name(nova):
    return {w.name: w for w in nova.workers()}


def test_three_speeds_and_a_kill_9(fleet):
    nova = fleet.nova
    job = nova.enqueue("synthetic", [TaskSpec(f"prompt {i}", 0.15) for i in range(24)],
                       params={"seconds": 0.15})
    workers = {f: fleet(f"slow{f}", "--app", "synthetic", "--slowdown", str(f))
               for f in (1, 3, 12)}
    victim = workers[3]
    # kill the middle worker while it holds a lease
    held = wait_for(lambda: _held_by(nova, "slow3"), timeout_s=60, message="slow3 to lease")
    victim.signal(signal.SIGKILL)
    victim.wait(10)
    st = wait_for(lambda: (lambda s: s if s.finished else None)(nova.job(job)), timeout_s=90,
                  message="job to finish")
    assert (st.state, st.done, st.failed) == ("done", 24, 0)
    assert all(n == 1 for n in committed_per_task(nova, job).values())
    assert len(committed_per_task(nova, job)) == 24
    for tid in held:
        t = nova.task(tid)
        assert t.state == "done" and t.worker_name != "slow3" and t.lease_gen >= 2
    lost = [e for e in nova.events(count=100_000)
            if e.type == "requeued" and e.fields.get("task") in {t.split(":")[1] for t in held}]
    assert lost and {e.fields["kind"] for e in lost} <= {"lost", "expired"}
    done_by = collections.Counter(t.worker_name for t in st.tasks)
    assert done_by["slow1"] > done_by["slow12"], done_by
    assert done_by["slow12"] == min(done_by[w] for w in ("slow1", "slow12")), done_by
    # every committed result is in the store, and readable
    for t in st.tasks:
        assert fleet.store.get(t.result).content_type == "image/png"


def _held_by(nova, name):
    for w in nova.workers():
        if w.name == name and w.alive and w.current:
            return w.current
    return None


def test_frozen_worker_late_result_is_rejected(fleet):
    nova = fleet.nova
    job = nova.enqueue("synthetic", [TaskSpec("frozen task", 1.5)], params={"seconds": 1.5})
    frozen = fleet("frozen", "--app", "synthetic", "--no-benchmark")
    tid = wait_for(lambda: _held_by(nova, "frozen"), timeout_s=60, message="lease")[0]
    first_gen = nova.task(tid).lease_gen
    os.kill(frozen.pid, signal.SIGSTOP)
    # beyond the TTL, another worker takes over and finishes the job
    rescuer = fleet("rescuer", "--app", "synthetic", "--no-benchmark")
    st = wait_for(lambda: (lambda s: s if s.finished else None)(nova.job(job)), timeout_s=60,
                  message="rescuer to finish")
    t = st.tasks[0]
    assert t.worker_name == "rescuer" and t.lease_gen > first_gen
    os.kill(frozen.pid, signal.SIGCONT)
    # the frozen worker finishes its run: its commit must be rejected as stale
    wait_for(lambda: any(e.type == "stale_rejected" for e in nova.events(count=10000))
             or "dropping" in frozen.output() or "abandoned" in frozen.output(),
             timeout_s=30, message="stale rejection")
    frozen.signal(signal.SIGTERM)
    frozen.wait(30)
    rescuer.signal(signal.SIGTERM)
    rescuer.wait(30)
    after = nova.task(tid)
    assert (after.state, after.result, after.worker_name) == ("done", t.result, "rescuer")
    # the late object is not the committed result: deleted as an orphan or never uploaded
    keys = list(fleet.store.list(f"jobs/{job}/results/"))
    assert keys == [t.result]
    assert fleet.store.get(t.result).metadata["worker"] == "rescuer"
    assert committed_per_task(nova, job) == {0: 1}


def test_sigterm_releases_leases_without_using_an_attempt(fleet):
    nova = fleet.nova
    job = nova.enqueue("synthetic", [TaskSpec("long task", 30)], params={"seconds": 30})
    w = fleet("graceful", "--app", "synthetic", "--no-benchmark")
    tid = wait_for(lambda: _held_by(nova, "graceful"), timeout_s=60, message="lease")[0]
    w.signal(signal.SIGTERM)
    assert w.wait(20) == 0
    t = nova.task(tid)
    assert (t.state, t.attempt_count, t.error_kind) == ("pending", 0, "shutdown")
    assert worker_by_name(nova)["graceful"].state == "stopped"
    assert nova.job(job, with_tasks=False).pending == 1
    assert "Traceback" not in w.output()


def test_burst_and_max_tasks(fleet):
    nova = fleet.nova
    job = nova.enqueue("synthetic", [TaskSpec(f"p{i}", 0.01) for i in range(5)],
                       params={"seconds": 0.01})
    w = fleet("limited", "--app", "synthetic", "--no-benchmark", "--max-tasks", "2")
    assert w.wait(60) == 0
    assert nova.job(job, with_tasks=False).done == 2
    w2 = fleet("burst", "--app", "synthetic", "--no-benchmark", "--burst")
    assert w2.wait(60) == 0
    assert nova.job(job, with_tasks=False).state == "done"


def test_oom_and_poison_tasks(fleet):
    nova = fleet.nova
    prompts = ["fine 1", "POISON pill", "fine 2"]
    job = nova.enqueue("synthetic", [TaskSpec(p, 0.01) for p in prompts],
                       params={"seconds": 0.01, "crash_on": "POISON"}, max_attempts=2)
    w = fleet("p", "--app", "synthetic", "--no-benchmark", "--burst")
    assert w.wait(60) == 0
    st = nova.job(job)
    assert (st.state, st.done, st.failed) == ("done", 2, 1)
    bad = st.tasks[1]
    assert bad.state == "failed" and bad.attempt_count == 2 and "poison" in bad.error.lower()


def test_backend_refusal_is_one_clear_line(tmp_path, redis_url, namespace):
    env = {**os.environ, "NOVA_REDIS_URL": redis_url, "NOVA_NAMESPACE": namespace,
           "NOVA_HOME": str(tmp_path)}
    for backend in ("cuda", "rocm", "mps"):
        out = subprocess.run([sys.executable, "-m", "nova_queue", "--log-level", "ERROR",
                              "worker", "--backend", backend], env=env, capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 1
        assert "Traceback" not in out.stderr
        lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: backend") and backend in lines[0]
    nova = NovaClient.from_url(redis_url, namespace=namespace)
    assert nova.workers() == []  # nothing registered


def test_node_identity_persists_across_restarts(fleet):
    nova = fleet.nova
    for _ in range(2):
        w = fleet("same", "--app", "synthetic", "--no-benchmark", "--burst")
        assert w.wait(60) == 0
    ws = [x for x in nova.workers() if x.name == "same"]
    assert len(ws) == 2 and ws[0].worker_id != ws[1].worker_id
    assert ws[0].node_id == ws[1].node_id and ws[0].host_id == ws[1].host_id
    node = json.loads((fleet.procs[0].log_path.parent / ".nova" / "node.json").read_text())
    assert node["node_id"] == ws[0].node_id
