"""Startup benchmark: load time, one warm-up (compile / first-run) task, then timed runs
of the app's representative task -> the initial seconds-per-cost-unit estimate."""

from __future__ import annotations

import dataclasses
import logging
import statistics
import time

from nova_queue.apps.base import AppContext, TaskInput
from nova_queue.workers.apps import WorkerApp
from nova_queue.workers.execute import WorkerShutdown, run_app
from nova_queue.workers.loading import still_running

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class AppBenchmark:
    """What the startup benchmark measured for one app (None: not measured)."""

    load_s: float | None = None
    cold_s: float | None = None
    bench_s: float | None = None  # seconds per cost unit, median of warm runs
    runs: int = 0
    error: str = ""

    def for_registry(self) -> dict[str, float | None]:
        """The ``register`` script's per-app record."""
        return {"bench_s": self.bench_s, "load_s": self.load_s, "cold_s": self.cold_s}


def benchmark_app(app: WorkerApp, ctx: AppContext, *, runs: int = 3,
                  budget_s: float = 30.0) -> AppBenchmark:
    """Measure ``app`` on this worker; failures are reported, not raised."""
    runner = app.runner
    try:
        text, params = runner.benchmark_task()
        cost = app.spec.make_tasks([text], params)[0].cost
        task = TaskInput(task_id="benchmark:0", job_id="benchmark", index=0, input=text,
                         cost=cost, params=params, attempt=1, lease_gen=0,
                         attempt_id="benchmark")
        started = time.perf_counter()
        log.info("benchmark %s: preparing (an app with a model loads it first)", app.name)
        with still_running(app.name, "preparing the startup benchmark"):
            runner.prepare(params)
        load_s = time.perf_counter() - started
        with still_running(app.name, "running the startup benchmark's first task"):
            _, cold_s = run_app(runner, ctx, [task])
        times: list[float] = []
        deadline = time.perf_counter() + budget_s
        while len(times) < runs and time.perf_counter() < deadline:
            _, elapsed = run_app(runner, ctx, [task])
            times.append(elapsed)
    except WorkerShutdown:
        raise
    except Exception as exc:  # noqa: BLE001 - a failed benchmark means "explore", not "crash"
        log.warning("startup benchmark of %s failed: %s: %s", app.name, type(exc).__name__, exc)
        return AppBenchmark(error=f"{type(exc).__name__}: {exc}")
    bench_s = statistics.median(times) / cost if times and cost > 0 else None
    log.info("benchmark %s: load %.3f s, first run %.3f s, %.4f s per cost unit (%d runs)",
             app.name, load_s, cold_s, bench_s or float("nan"), len(times))
    return AppBenchmark(load_s=load_s, cold_s=cold_s, bench_s=bench_s, runs=len(times))
