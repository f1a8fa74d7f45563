"""The per-task work of the scheduling benchmark, for the baseline (non-nova) workers.

Exactly what a nova-queue worker does for one ``synthetic`` task — hash for
``seconds × slowdown`` of wall time, draw the PNG card, upload it write-once to the same
kind of result store — so the policies differ only in how tasks reach workers.
"""

from __future__ import annotations

import time

from nova_queue.apps.base import AppContext, TaskInput
from nova_queue.stores import open_store, result_key
from nova_queue.workers.apps import load_worker_app


class Workload:
    """One baseline worker's copy of the synthetic app and result store."""

    def __init__(self, worker_name: str, slowdown: float, store_url: str):
        self.name = worker_name
        self.app = load_worker_app("synthetic")
        self.app.runner.setup(AppContext(
            backend="cpu", device="cpu", device_name="benchmark", worker_id=worker_name,
            worker_name=worker_name, slowdown=slowdown))
        self.store = open_store(store_url)

    def run(self, job_id: str, index: int, text: str, seconds: float) -> float:
        """Run one task and upload its result; returns the app's run time (s)."""
        params = self.app.spec.parse_params({"seconds": seconds})
        attempt_id = f"{self.name}{index}"
        task = TaskInput(task_id=f"{job_id}:{index}", job_id=job_id, index=index, input=text,
                         cost=seconds, params=params, attempt=1, lease_gen=1,
                         attempt_id=attempt_id)
        started = time.perf_counter()
        output = self.app.runner.run_batch([task])[0]
        run_s = time.perf_counter() - started
        key = result_key(job_id, index, 1, attempt_id, output.extension)
        meta = {"job": job_id, "task": task.task_id, "worker": self.name, "app": self.app.name}
        self.store.put(key, output.data, output.content_type, meta)
        return run_s


def baseline_startup() -> None:
    """What every GPU worker does before its first task, whatever the queue: import torch,
    self-test the backend, time a matmul (nova-queue's worker does the same, then its
    startup benchmark)."""
    from nova_queue.workers.backend import detect_backend, device_score_gflops

    info = detect_backend("auto")
    device_score_gflops(info, 0.3)
