"""Scenarios 24-30: the chaos of the direct mode, and the gateway's own, with workers that
join through ``nova-queue gateway`` with a token (no Redis or store credentials): worker
kill -9, a worker partitioned past its TTL, the gateway killed and restarted, two gateways
with one killed, a token revoked mid-job, a forged completion and an upload to another
attempt's key. Each run is checked by the history checker (lost, double, stale accepted,
two live leases all 0)."""

from __future__ import annotations

import io
import json
import os
import signal
import time

import pytest
import requests
from novatests.chaos.fleet import LEASE_TTL_S, no_tracebacks, stop_cleanly
from novatests.gateway import GatewayProc

from nova_queue import TaskSpec, protocol, tokens
from nova_queue.keys import result_key
from nova_queue.local import wait_for
from nova_queue.stores import open_store

pytestmark = pytest.mark.slow


def finished(nova, job):
    st = nova.job(job, with_tasks=False)
    return st if st.finished else None


def holders(nova) -> dict[str, list[str]]:
    return {w.name: w.current for w in nova.workers() if w.alive and w.current}


def job_of(nova, n: int, seconds: float, name: str = "gw") -> str:
    return nova.enqueue("synthetic", [TaskSpec(f"{name} {i}", seconds) for i in range(n)],
                        params={"seconds": seconds, "size": 64})


def test_gateway_worker_kill_9(pool, record):
    """Scenario 24: gateway workers killed (-9) mid-task, replacements join."""
    started = time.monotonic()
    gw, nova = pool.gateway(), pool.nova
    job = job_of(nova, 16, 0.2)
    live = {f"k{i}": pool.worker(gw, f"k{i}") for i in range(2)}
    for kill in range(3):
        busy = wait_for(lambda: sorted(set(holders(nova)) & set(live)) or finished(nova, job),
                        timeout_s=60, message="a gateway worker holding a lease")
        if not isinstance(busy, list):
            break
        live.pop(busy[0]).signal(signal.SIGKILL)
        live[f"r{kill}"] = pool.worker(gw, f"r{kill}")
    wait_for(lambda: finished(nova, job), timeout_s=120, message="the job to finish")
    stop_cleanly(live.values())
    record(24, pool.verdict(job), started)


def test_gateway_worker_partitioned_past_its_ttl(pool, record):
    """Scenario 25: a gateway worker frozen (SIGSTOP) past its TTL, then resumed: a rescuer
    takes over, the late result is fenced."""
    started = time.monotonic()
    gw, nova = pool.gateway(), pool.nova
    job = job_of(nova, 3, 1.0)
    frozen = pool.worker(gw, "frozen")
    wait_for(lambda: holders(nova).get("frozen"), timeout_s=60, message="a lease")
    os.kill(frozen.pid, signal.SIGSTOP)
    frozen_at = time.monotonic()
    rescuer = pool.worker(gw, "rescuer")
    wait_for(lambda: finished(nova, job), timeout_s=90, message="the rescuer to finish")
    assert time.monotonic() - frozen_at > LEASE_TTL_S
    os.kill(frozen.pid, signal.SIGCONT)
    wait_for(lambda: any(e.type == "stale_rejected" for e in nova.events(count=100_000))
             or "dropping" in frozen.output() or "abandoned" in frozen.output()
             or "lost" in frozen.output(), timeout_s=30, message="the late result fenced")
    stop_cleanly([frozen, rescuer])
    record(25, pool.verdict(job), started)


def test_gateway_killed_and_restarted_mid_job(pool, record):
    """Scenario 26: the only gateway killed (-9) mid-job and restarted on its port; the
    workers ride it out as a Redis outage and the job finishes."""
    started = time.monotonic()
    gw, nova = pool.gateway(), pool.nova
    job = job_of(nova, 12, 0.3)
    ws = [pool.worker(gw, f"g{i}") for i in range(2)]
    wait_for(lambda: nova.job(job, with_tasks=False).done >= 2, 60, message="progress")
    gw.kill9()
    time.sleep(1.0)  # the fault: no gateway for a while (half the lease TTL)
    gw.start()
    wait_for(lambda: finished(nova, job), timeout_s=120, message=f"the job\n{pool.logs()}")
    stop_cleanly(ws)
    record(26, pool.verdict(job), started)


def test_two_gateways_one_killed(pool, record):
    """Scenario 27: two gateways serve one pool; one is killed for good; its worker's tasks
    finish through the other."""
    started = time.monotonic()
    a, b = pool.gateway("gwa"), pool.gateway("gwb")
    nova = pool.nova
    job = job_of(nova, 12, 0.3)
    wa, wb = pool.worker(a, "via-a"), pool.worker(b, "via-b")
    wait_for(lambda: "via-a" in holders(nova), 60, message="via-a holding a lease")
    a.kill9()
    wait_for(lambda: finished(nova, job), timeout_s=120, message=f"the job\n{pool.logs()}")
    stop_cleanly([wb])
    wa.signal(signal.SIGTERM)  # cannot reach its gateway: exits without deregistering
    assert wa.wait(60) == 0
    no_tracebacks([wa])
    verdict = pool.verdict(job)
    record(27, verdict, started)
    assert nova.job(job, with_tasks=False).done == 12


def test_token_revoked_mid_job(pool, record):
    """Scenario 28: a token revoked while its worker runs a task: its leases go back at once,
    the worker stops, another finishes the job."""
    started = time.monotonic()
    gw, nova = pool.gateway(), pool.nova
    job = job_of(nova, 6, 0.5)
    doomed = pool.worker(gw, "doomed")
    wait_for(lambda: holders(nova).get("doomed"), timeout_s=60, message="a lease")
    tokens.revoke(nova, "doomed")
    assert doomed.wait(30) == 1 and "revoked" in doomed.output()
    other = pool.worker(gw, "other")
    wait_for(lambda: finished(nova, job), timeout_s=90, message="the job")
    stop_cleanly([other])
    record(28, pool.verdict(job), started)


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _thief(pool, gw: GatewayProc) -> str:
    """A token whose worker joined but runs nothing: the forger's."""
    token = tokens.create(pool.nova, "thief")
    res = requests.post(gw.url + "/v1/hello", json={"protocol": protocol.PROTOCOL},
                        headers=_auth(token), timeout=10)
    wid = res.json()["worker_id"]
    res = requests.post(gw.url + "/v1/register", headers={**_auth(token), "X-Nova-Worker": wid},
                        json={"fields": {"name": "thief"}, "apps": ["synthetic"]}, timeout=10)
    assert res.status_code == 200, res.text
    return token


def _forge(gw: GatewayProc, token: str, lease: dict, key: str, data: bytes = b"forged"):
    """A multipart commit of ``lease`` with ``key`` and ``data`` under ``token``."""
    fence = {k: lease[k] for k in ("task_id", "app", "lease_gen", "attempt_id")}
    body = {"lease": fence, "key": key, "run_s": 0.1, "warm": True}
    return requests.post(gw.url + "/v1/complete", headers=_auth(token), timeout=10, data={
        "commit": json.dumps(body), "content_type": "image/png", "metadata": "{}"},
        files={"data": ("r", io.BytesIO(data), "image/png")})


def _held_lease(nova, name: str) -> dict:
    tid = wait_for(lambda: holders(nova).get(name), timeout_s=60, message="a lease")[0]
    t = nova.task(tid)
    return {"task_id": tid, "app": "synthetic", "lease_gen": t.lease_gen,
            "attempt_id": t.attempt_id, "job_id": t.job_id, "index": t.index}


def test_forged_completion_for_another_workers_lease(pool, record):
    """Scenario 29: a second token commits (and fails) a lease another worker holds, with its
    key; both are refused (403, stale rejected) and the holder's result stands."""
    started = time.monotonic()
    gw, nova = pool.gateway(), pool.nova
    job = job_of(nova, 4, 1.0)
    w = pool.worker(gw, "holder")
    thief = _thief(pool, gw)
    lease = _held_lease(nova, "holder")
    fence = {k: lease[k] for k in ("task_id", "app", "lease_gen", "attempt_id")}
    key = result_key(lease["job_id"], lease["index"], lease["lease_gen"], lease["attempt_id"],
                     "png")
    res = _forge(gw, thief, lease, key)
    assert res.status_code == 403 and res.json()["kind"] == "stale", res.text
    res = requests.post(gw.url + "/v1/fail", headers=_auth(thief), timeout=10,
                        json={"lease": fence, "kind": "error", "message": "forged"})
    assert res.status_code == 403, res.text
    wait_for(lambda: finished(nova, job), timeout_s=90, message="the job")
    stop_cleanly([w])
    verdict = pool.verdict(job)
    record(29, verdict, started)
    t = nova.task(lease["task_id"])
    assert t.worker_name == "holder" and t.attempt_count == 1 and verdict.rejected >= 1


def test_upload_to_another_attempts_key(pool, record):
    """Scenario 30: a second token sends a result for the key of an attempt another worker
    holds (and for that lease with another attempt id's key); both are refused, nothing is
    written, and the holder's result is the one stored."""
    started = time.monotonic()
    gw, nova = pool.gateway(), pool.nova
    job = job_of(nova, 4, 1.0)
    w = pool.worker(gw, "owner")
    thief = _thief(pool, gw)
    lease = _held_lease(nova, "owner")
    key = result_key(lease["job_id"], lease["index"], lease["lease_gen"], lease["attempt_id"],
                     "png")
    for sent_key in (key, key.replace(lease["attempt_id"], "forgedattempt")):
        res = _forge(gw, thief, lease, sent_key)
        assert res.status_code == 403, res.text
    store = open_store(pool.store_url)
    assert not store.exists(key.replace(lease["attempt_id"], "forgedattempt"))
    wait_for(lambda: finished(nova, job), timeout_s=90, message="the job")
    stop_cleanly([w])
    verdict = pool.verdict(job)
    record(30, verdict, started)
    t = nova.task(lease["task_id"])
    assert open_store(pool.store_url).get(t.result).data != b"forged"
