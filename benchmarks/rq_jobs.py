"""RQ job functions (imported by RQ workers as ``rq_jobs.<name>``)."""

from __future__ import annotations

import os
from typing import Any

_WORKLOAD: Any = None


def noop() -> None:
    """The lifecycle benchmark's job: nothing."""


def synthetic_task(job_id: str, index: int, text: str, seconds: float) -> dict[str, Any]:
    """The scheduling benchmark's job: the worker's slowdown and store come from its env."""
    global _WORKLOAD
    if _WORKLOAD is None:
        from workload import Workload

        _WORKLOAD = Workload(os.environ["NOVA_BENCH_WORKER"],
                             float(os.environ["NOVA_BENCH_SLOWDOWN"]),
                             os.environ["NOVA_BENCH_STORE_URL"])
    run_s = _WORKLOAD.run(job_id, index, text, seconds)
    return {"worker": _WORKLOAD.name, "run_s": run_s}
