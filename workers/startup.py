"""Startup benchmark: load time, one warm-up (compile / first-run) task, then timed runs
of the app's representative task -> the initial seconds-per-cost-unit estimate.

It is also the worker's self-test (:func:`self_test`): an app whose benchmark fails is not
served (one log line says why and how to fix it), and a worker left with no app exits with
:data:`EXIT_NO_APP`. ``--no-benchmark`` skips both: every app is served, unproven.
"""

from __future__ import annotations

import dataclasses
import logging
import statistics
import time

from nova_queue.apps.base import AppContext, TaskInput
from nova_queue.workers.apps import WorkerApp
from nova_queue.workers.execute import WorkerShutdown, run_app
from nova_queue.workers.loading import still_running
from nova_queue.workers.prepare import failure_reason

log = logging.getLogger(__name__)

#: Exit code of a worker none of whose apps passed the startup self-test (sysexits.h's
#: EX_CONFIG: restarting it will not help until the machine is fixed).
EXIT_NO_APP = 78


class NoAppError(Exception):
    """No app this worker was asked to serve passed its startup self-test."""


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
    except Exception as exc:  # noqa: BLE001 - a failed self-test drops the app (self_test)
        return AppBenchmark(error=failure_reason(runner, exc))
    bench_s = statistics.median(times) / cost if times and cost > 0 else None
    log.info("benchmark %s: load %.3f s, first run %.3f s, %.4f s per cost unit (%d runs)",
             app.name, load_s, cold_s, bench_s or float("nan"), len(times))
    return AppBenchmark(load_s=load_s, cold_s=cold_s, bench_s=bench_s, runs=len(times))


def self_test(apps: dict[str, WorkerApp], ctx: AppContext, *, benchmark: bool = True
              ) -> tuple[dict[str, WorkerApp], dict[str, AppBenchmark]]:
    """Benchmark each app; the apps that passed, and their benchmarks. An app that
    failed is not served (one log line, naming the fix); NoAppError when none passed.
    ``benchmark=False`` (``--no-benchmark``): no self-test, every app is served."""
    if not benchmark:
        return dict(apps), {name: AppBenchmark() for name in apps}
    results = {name: benchmark_app(app, ctx) for name, app in apps.items()}
    passed = {name: app for name, app in apps.items() if not results[name].error}
    for name in [n for n in apps if n not in passed]:
        log.error("startup self-test of %s failed: %s; not serving %s", name,
                  results[name].error, name)
        try:
            apps[name].runner.teardown()
        except Exception as exc:  # noqa: BLE001 - best effort: the app is dropped anyway
            log.warning("teardown of %s failed: %s", name, exc)
    if not passed:
        raise NoAppError(f"no app passed its startup self-test ({', '.join(apps)}): "
                         f"exiting with code {EXIT_NO_APP}")
    return passed, {name: results[name] for name in passed}
