"""A real ``worker --concurrency 2`` process for the slot tests, driven by a synthetic
control file (2 s leases, 0.5 s heartbeats, 1 s abandon grace)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

from nova_queue import NovaClient
from nova_queue.local import wait_for
from novatests.procs import WorkerProc


@contextlib.contextmanager
def slot_worker_process(redis_url: str, namespace: str, tmp_path: Any,
                        control: dict[str, Any]) -> Iterator[tuple[WorkerProc, str, NovaClient,
                                                                   str]]:
    """The process, joined and with a measured speed (one claim fills both slots); yields
    (process, its worker id, a client of the namespace, the store URL)."""
    store_url = (tmp_path / "store").as_uri()
    ctl = tmp_path / "control.json"
    ctl.write_text(json.dumps(control))
    nova = NovaClient.from_url(redis_url, namespace=namespace, lease_ttl_s=2.0,
                               heartbeat_interval_s=0.5)
    proc = WorkerProc(redis_url, namespace, store_url, tmp_path / "w", "--app", "synthetic",
                      "--no-benchmark", "--concurrency", "2", "-o", f"control={ctl}",
                      env={"NOVA_LEASE_TTL_S": "2", "NOVA_HEARTBEAT_INTERVAL_S": "0.5",
                           "NOVA_ABANDON_GRACE_S": "1"})
    try:
        wait_for(lambda: nova.eligible_workers("synthetic"), timeout_s=60,
                 message="the worker to join")
        [wid] = nova.eligible_workers("synthetic")
        nova.redis.hset(nova.keys.worker(wid), mapping={"ema:synthetic": 0.05,
                                                        "n:synthetic": 5})
        yield proc, wid, nova, store_url
    finally:
        proc.close()
        nova.close()
