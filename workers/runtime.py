"""The worker: wait for Redis, detect and prove the backend, benchmark, register, then
claim -> run -> upload -> commit until stopped. The same code on every machine."""

from __future__ import annotations

import dataclasses
import logging
import os
import secrets
import signal
import socket
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import FrameType
from typing import Any

import redis

from nova_queue import __version__
from nova_queue.apps.base import AppContext
from nova_queue.client import NovaClient
from nova_queue.errors import WorkerLostError
from nova_queue.settings import Settings
from nova_queue.stores import ResultStore
from nova_queue.workers.apps import WorkerApp, load_worker_app
from nova_queue.workers.backend import BackendInfo, capability, detect_backend, device_score_gflops
from nova_queue.workers.execute import Executor, WorkerShutdown
from nova_queue.workers.heartbeat import Heartbeat
from nova_queue.workers.node import load_or_create_node, new_worker_id
from nova_queue.workers.redis_wait import wait_for_redis
from nova_queue.workers.startup import AppBenchmark, benchmark_app

log = logging.getLogger(__name__)

#: Longest pause between claims when there is nothing to do.
MAX_IDLE_WAIT_S = 2.0
#: Longest back-off after Redis or the store failed.
MAX_BACKOFF_S = 30.0
#: Events that can give a waiting worker something to claim.
WAKE_EVENTS = frozenset({"enqueued", "requeued"})
#: While other workers' events stream by, look for a wake event at most this often.
WAKE_POLL_S = 0.05


@dataclasses.dataclass(frozen=True)
class WorkerOptions:
    """``nova-queue worker`` flags."""

    apps: tuple[str, ...] = ("synthetic",)
    backend: str = "auto"
    name: str | None = None
    slowdown: float = 1.0
    burst: bool = False
    max_tasks: int | None = None
    app_options: Mapping[str, str] = dataclasses.field(default_factory=dict)
    benchmark: bool = True
    gflops_s: float = 0.3


class Worker:
    """One worker process. ``run()`` returns the process exit code."""

    def __init__(self, settings: Settings, options: WorkerOptions, *,
                 client: NovaClient | None = None, store: ResultStore | None = None):
        self.settings = settings
        self.options = options
        self.client = client or NovaClient.from_settings(settings)
        self._store = store
        self.stop_event = threading.Event()
        self._in_setup = False
        #: registered at least once: only then is there anything to deregister
        self._registered = False
        self.tasks_done = 0
        self.info: BackendInfo | None = None
        self.apps: dict[str, WorkerApp] = {}
        self.executors: dict[str, Executor] = {}
        self.benchmarks: dict[str, AppBenchmark] = {}
        self._fields: dict[str, Any] = {}
        self._last_params: dict[str, dict[str, Any]] = {}
        self._claim_ids: dict[str, list[str]] = {}
        #: what a commit-and-claim answered for an app, used by the next claim of that app
        self._prefetched: dict[str, Any] = {}

    # ---- setup ----------------------------------------------------------------------------
    def setup(self) -> None:
        """Redis, backend, identity, apps, startup benchmark, registration, heartbeat."""
        from nova_queue.stores import open_store

        # Redis first: bad credentials fail before minutes of model loading and benchmark
        if not wait_for_redis(self.client.redis.ping, self.settings.redis_url,
                              self.stop_event):
            raise WorkerShutdown()
        self.info = detect_backend(self.options.backend)
        node = load_or_create_node(Path(self.settings.home), self.options.name)
        self.worker_id = new_worker_id(node)
        self.name = node.name
        self.store = self._store or open_store(self.settings.resolved_store_url,
                                               public_endpoint=self.settings.s3_public_endpoint)
        ctx = AppContext(
            backend=self.info.backend, device=self.info.device,
            device_name=self.info.device_name, worker_id=self.worker_id, worker_name=self.name,
            memory_total=self.info.memory_total, memory_free=self.info.memory_free,
            slowdown=self.options.slowdown, options=dict(self.options.app_options))
        self.ctx = ctx
        for name in self.options.apps:
            app = load_worker_app(name)
            app.runner.setup(ctx)
            self.apps[name] = app
        gflops = device_score_gflops(self.info, self.options.gflops_s) if self.options.gflops_s else None
        for name, app in self.apps.items():
            self.benchmarks[name] = (benchmark_app(app, ctx) if self.options.benchmark
                                     else AppBenchmark())
        cap = capability(self.info, node, list(self.apps), gflops=gflops)
        cap.update(slowdown=self.options.slowdown, nova_queue=__version__,
                   benchmarks={a: dataclasses.asdict(b) for a, b in self.benchmarks.items()})
        self._fields = {
            "name": self.name, "host": socket.gethostname(), "host_id": node.host_id,
            "node_id": node.node_id, "pid": os.getpid(), "backend": self.info.backend,
            "device": self.info.device_name, "memory_total": self.info.memory_total,
            "memory_free": self.info.memory_free, "gflops": gflops,
            "slowdown": self.options.slowdown, "capability": _json(cap),
        }
        self.heartbeat = Heartbeat(self.client, self.worker_id,
                                   self.settings.heartbeat_interval_s, self.register)
        for name, app in self.apps.items():
            executor = Executor(self.client, self.store, app, ctx, self.heartbeat)
            executor.ran_once = self.benchmarks[name].runs > 0  # the benchmark warmed it up
            self.executors[name] = executor
        self._retry_redis(self.register)  # Redis may have gone away during the benchmark
        if not self._registered:  # stopped while waiting
            raise WorkerShutdown()
        self.heartbeat.start()
        log.info("worker %s (%s) joined: backend %s on %s, apps %s", self.name, self.worker_id,
                 self.info.backend, self.info.device_name, ", ".join(self.apps))

    def register(self) -> None:
        """Join (or re-join) the fleet with the capability record and benchmark."""
        self.client.register_worker(
            self.worker_id, self._fields, list(self.apps),
            {a: b.for_registry() for a, b in self.benchmarks.items()})
        self._registered = True

    # ---- signals --------------------------------------------------------------------------
    def install_signal_handlers(self) -> None:
        """SIGTERM/SIGINT: stop claiming, abandon the running task, release leases."""
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        log.info("received %s: stopping", signal.Signals(signum).name)
        self.stop_event.set()
        # interrupt only app code (setup, benchmark, a running batch), never a Redis call
        # or an upload, so no commit is left half-done
        if self._in_setup or any(e.in_app for e in self.executors.values()):
            raise WorkerShutdown()

    def stop(self) -> None:
        """Ask the loop to stop after the current step (thread-safe)."""
        self.stop_event.set()

    # ---- the loop -------------------------------------------------------------------------
    def run(self) -> int:
        """Set up, loop until stopped (or ``--burst`` / ``--max-tasks`` says so), clean up."""
        try:
            self._in_setup = True
            try:
                self.setup()
            finally:
                self._in_setup = False
            self._loop()
        except WorkerShutdown:
            log.info("shutdown requested %s", "during a task; releasing leases"
                     if self._registered else "during start-up")
        finally:
            self._shutdown()
        return 0

    def _loop(self) -> None:
        backoff = 0.5
        names = list(self.apps)
        turn = 0
        waiting = False
        while not self.stop_event.is_set():
            if self.options.max_tasks is not None and self.tasks_done >= self.options.max_tasks:
                log.info("finished %d task(s) (--max-tasks)", self.tasks_done)
                return
            statuses = []
            waits = []
            try:
                # still waiting: note the event stream's position before claiming, so that a
                # job enqueued after this claim round ends the wait below at once
                mark = self._event_mark() if waiting else None
                for i in range(len(names)):
                    app = names[(turn + i) % len(names)]
                    result = self._claim(app)
                    statuses.append(result.status)
                    if result.status == "ok":
                        # the last commit claims for the app whose turn comes next
                        self._run(app, result.leases, names[(turn + i + 1) % len(names)])
                        turn = (turn + i + 1) % len(names)
                        break
                    waits.append(result.retry_after_s)
                backoff = 0.5
            except WorkerLostError:
                log.warning("not registered (declared lost?): joining again")
                self._retry_redis(self.register)
                continue
            except redis.RedisError as exc:
                log.warning("Redis unavailable (%s); retrying in %.1f s", exc, backoff)
                self.stop_event.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)
                continue
            if "ok" in statuses:
                waiting = False
                if any(e.infra_errors for e in self.executors.values()):
                    self._infra_pause()
                continue
            if self.options.burst and all(s == "empty" for s in statuses):
                log.info("no work left for %s (--burst): exiting", ", ".join(names))
                return
            waiting = True
            self._wait_for_work(mark, min(min(waits or [MAX_IDLE_WAIT_S]), MAX_IDLE_WAIT_S))

    def _event_mark(self) -> str | None:
        """The event stream's newest id; None if it cannot be read (e.g. an ACL without
        XREVRANGE), and the wait below then simply sleeps for the claim's hint."""
        try:
            return self.client.last_event_id()
        except redis.ResponseError:
            return None

    def _wait_for_work(self, after: str | None, wait_s: float) -> None:
        """Sleep up to ``wait_s`` (the claim's hint), but wake as soon as a job is enqueued
        or a task requeued: the event stream says so (XREAD BLOCK)."""
        deadline = time.monotonic() + wait_s
        try:
            if after is None:  # first wait after work: a job enqueued since the claim waits
                after = self.client.last_event_id()  # at most wait_s, as without the stream
            while not self.stop_event.is_set():
                left_ms = int((deadline - time.monotonic()) * 1000)
                if left_ms <= 0:
                    return
                events = self.client.events(after, count=100, block_ms=left_ms)
                if any(e.type in WAKE_EVENTS for e in events):
                    return
                if events:  # other workers' claims and commits: look again a little later
                    after = events[-1].id
                    self.stop_event.wait(min(WAKE_POLL_S, max(0.0, deadline - time.monotonic())))
        except redis.RedisError:
            self.stop_event.wait(max(0.0, deadline - time.monotonic()))

    def _attempt_ids(self, app: str, tasks_done: int) -> list[str]:
        """Fresh attempt ids for a claim of ``app``: as many as the batch size of the last
        job's params (e.g. its image size; defaults at first), within ``--max-tasks``."""
        spec, runner = self.apps[app].spec, self.apps[app].runner
        params = self._last_params.get(app) or spec.parse_params({})
        k = max(1, int(runner.batch_size(params)))
        if self.options.max_tasks is not None:
            k = max(1, min(k, self.options.max_tasks - tasks_done))
        return [secrets.token_hex(8) for _ in range(k)]

    def _claim(self, app: str):
        prefetched = self._prefetched.pop(app, None)
        if prefetched is not None:  # the last commit already claimed (one round trip)
            return prefetched
        # a claim that failed may have run (its reply lost): asking again with the same
        # attempt ids returns those leases instead of orphaning them (claim-12)
        ids = self._claim_ids.pop(app, None) or self._attempt_ids(app, self.tasks_done)
        try:
            return self.client.claim(self.worker_id, app, len(ids), attempt_ids=ids)
        except redis.RedisError:
            self._claim_ids[app] = ids
            raise

    def _run(self, app: str, leases: list, next_app: str) -> None:
        self.heartbeat.hold(leases)
        try:
            self._last_params[app] = self.apps[app].spec.parse_params(leases[-1].params)
        except Exception:  # noqa: BLE001 - bad params are reported by the executor
            self._last_params.pop(app, None)
        executor = self.executors[app]
        before = executor.committed

        def then_claim() -> tuple[str, list[str]] | None:
            """At the last commit: claim for ``next_app`` in the same call, unless the
            worker is stopping, has reached --max-tasks, or holds attempt ids in doubt."""
            done = self.tasks_done + executor.committed - before + 1
            if self.stop_event.is_set() or next_app in self._claim_ids:
                return None
            if self.options.max_tasks is not None and done >= self.options.max_tasks:
                return None
            return next_app, self._attempt_ids(next_app, done)

        try:
            if self.stop_event.is_set():
                raise WorkerShutdown()
            executor.run(leases, then_claim)
        finally:
            self.tasks_done += executor.committed - before
            if executor.claimed is not None:
                self._prefetched[executor.claimed[0]] = executor.claimed[1]
            if executor.claim_in_doubt is not None:
                self._claim_ids[executor.claim_in_doubt[0]] = executor.claim_in_doubt[1]
            executor.claimed = executor.claim_in_doubt = None  # taken over

    def _infra_pause(self) -> None:
        pause = min(MAX_BACKOFF_S, 2.0 ** min(sum(e.infra_errors for e in self.executors.values()), 5))
        for e in self.executors.values():
            e.infra_errors = 0
        log.warning("result store failing: pausing %.0f s before claiming again", pause)
        self.stop_event.wait(pause)

    def _retry_redis(self, fn) -> None:
        delay = 0.5
        while not self.stop_event.is_set():
            try:
                fn()
                return
            except redis.RedisError as exc:
                log.warning("Redis unavailable (%s); retrying in %.1f s", exc, delay)
                self.stop_event.wait(delay)
                delay = min(delay * 2, MAX_BACKOFF_S)

    def _shutdown(self) -> None:
        heartbeat = getattr(self, "heartbeat", None)
        if heartbeat is not None:
            heartbeat.stop()
        if self._registered:
            try:
                released = self.client.deregister_worker(self.worker_id)
                if released:
                    log.info("released %d lease(s) without using an attempt", released)
            except redis.RedisError as exc:
                log.warning("could not deregister (%s); leases expire on their own", exc)
        for app in self.apps.values():
            try:
                app.runner.teardown()
            except Exception as exc:  # noqa: BLE001 - best effort on the way out
                log.warning("teardown of %s failed: %s", app.name, exc)
        if heartbeat is not None and heartbeat.is_alive():
            heartbeat.join(timeout=self.settings.heartbeat_interval_s + 5)
        if self._registered:
            log.info("worker stopped after %d task(s)", self.tasks_done)


def _json(value: Any) -> str:
    import json

    return json.dumps(value, default=str, sort_keys=True)
