"""The worker: wait for its pool, detect and prove the backend, benchmark, register, then
claim -> run -> upload -> commit until stopped. The same code on every machine, and in
both modes: the worker holds one :class:`~nova_queue.workers.transport.WorkerTransport`,
straight to Redis and the store or through a gateway (``--gateway``: the link of
:mod:`~nova_queue.workers.link`), and never asks which.

The loop reads as named steps (rq's ``work()``): stop at the ``--max-tasks`` budget, claim
for each app in turn (:meth:`Worker._claim_round`), run what was claimed (:meth:`_execute`,
with ``--concurrency`` slots where the app allows: the run's last commit claims the next
tasks in the same round trip, and :class:`~nova_queue.workers.claims.Claims` keeps the
answer), pause while the store fails, or wait for work on the event stream.

A running batch whose every lease is lost (past its run-time limit, or a backup elsewhere
committed first) is abandoned: the heartbeat thread interrupts the app and the worker claims
again; an app that does not stop in time ends the process (:mod:`~nova_queue.workers.abandon`),
and so does, at shutdown, a task slot's app that does not return.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import signal
import threading
from collections.abc import Mapping
from pathlib import Path
from types import FrameType
from typing import Any

import redis

from nova_queue.apps.base import AppContext
from nova_queue.client import NovaClient
from nova_queue.errors import NovaError, WorkerLostError
from nova_queue.models import Lease
from nova_queue.settings import Settings
from nova_queue.stores import ResultStore
from nova_queue.workers.abandon import EXIT_RESTART, Abandoner
from nova_queue.workers.apps import WorkerApp, load_worker_app
from nova_queue.workers.backend import BackendInfo, detect_backend, device_score_gflops
from nova_queue.workers.claims import Claims
from nova_queue.workers.execute import Executor, RunOutcome, WorkerShutdown
from nova_queue.workers.heartbeat import Heartbeat
from nova_queue.workers.node import Node, load_or_create_node, new_worker_id
from nova_queue.workers.record import registry_fields
from nova_queue.workers.slots import app_slots
from nova_queue.workers.startup import EXIT_NO_APP, AppBenchmark, NoAppError, self_test
from nova_queue.workers.transport import WorkerTransport, open_transport

log = logging.getLogger(__name__)

#: Longest pause between claims when there is nothing to do.
MAX_IDLE_WAIT_S = 2.0
#: Longest back-off after Redis or the store failed.
MAX_BACKOFF_S = 30.0
__all__ = ["EXIT_NO_APP", "EXIT_RESTART", "Worker", "WorkerOptions"]  # exit codes: supervisors


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
    #: custom labels (``--label key=value``), besides the automatic ones (workers/labels.py)
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    benchmark: bool = True
    #: seconds the matmul device score (registered as ``gflops``) may take; 0 skips it
    device_score_s: float = 0.3
    #: task slots for apps that declare it safe (``--concurrency``, workers/slots.py)
    concurrency: int = 1
    #: dollars per hour of this worker (``--cost-per-hour``; registered as ``price``)
    cost_per_hour: float = 0.0


@dataclasses.dataclass(frozen=True)
class _Round:
    """One claim round over the worker's apps: whether a run happened, each claim's status,
    how long to wait before the next round, and the run's result-store failures."""

    ran: bool
    statuses: tuple[str, ...] = ()
    wait_s: float = 0.0
    infra_errors: int = 0


class Worker:
    """One worker process. ``run()`` returns the process exit code. ``client``, ``store``:
    a Redis client and result store to use (else the settings': Redis and the store, or
    a gateway when they name one)."""

    def __init__(self, settings: Settings, options: WorkerOptions, *,
                 client: NovaClient | None = None, store: ResultStore | None = None):
        self.settings = settings
        self.options = options
        #: the worker's transport: every call it makes of its pool (workers/transport.py)
        self.client: WorkerTransport = open_transport(settings, client=client, store=store)
        self.stop_event = threading.Event()
        self._in_setup = False
        #: registered at least once: only then is there anything to deregister
        self._registered = False
        self.info: BackendInfo | None = None
        self.apps: dict[str, WorkerApp] = {}
        self.executors: dict[str, Executor] = {}
        self.benchmarks: dict[str, AppBenchmark] = {}
        self.claims: Claims | None = None
        self._fields: dict[str, Any] = {}
        #: index (in ``apps``) of the app claimed first in the next round
        self._turn = 0
        #: abandons running batches whose leases are all lost
        self.abandon = Abandoner(self.client, settings.abandon_grace_s)

    @property
    def tasks_done(self) -> int:
        """Tasks this worker committed."""
        return self.claims.done if self.claims is not None else 0

    # ---- setup ----------------------------------------------------------------------------
    def setup(self) -> None:
        """The pool, backend, identity, apps, startup benchmark (the self-test: an app that
        fails it is not served), registration, heartbeat."""
        node = self._connect()
        self.name = node.name
        self.ctx = self._app_context()
        self._load_apps()
        gflops = (device_score_gflops(self.info, self.options.device_score_s)
                  if self.options.device_score_s else None)
        self.apps, self.benchmarks = self_test(self.apps, self.ctx,
                                               benchmark=self.options.benchmark)
        self._fields = self._registry_fields(node, gflops)
        self.heartbeat = Heartbeat(self.client, self.worker_id,
                                   self.settings.heartbeat_interval_s, self.register,
                                   on_lost=self._on_leases_lost)
        self.abandon.bind(self.worker_id, self.heartbeat)
        slots = app_slots(self.apps, self.options.concurrency)  # --concurrency, where safe
        self.executors = {
            name: Executor(self.client, app, self.ctx, self.heartbeat, self.stop_event,
                           warm=self.benchmarks[name].runs > 0, slots=slots[name],
                           dropped=self.abandon.dropped)
            for name, app in self.apps.items()}  # warm: the benchmark ran the app
        self.claims = Claims(self.client, self.worker_id, self.apps, slots=slots,
                             max_tasks=self.options.max_tasks, stopping=self.stop_event.is_set)
        self._retry_redis(self.register)  # Redis may have gone away during the benchmark
        if not self._registered:  # stopped while waiting
            raise WorkerShutdown()
        self.heartbeat.start()
        log.info("worker %s (%s) joined: backend %s on %s, apps %s", self.name, self.worker_id,
                 self.info.backend, self.info.device_name, ", ".join(self.apps))

    def _connect(self) -> Node:
        """The pool and its protocol first (``hello``): bad credentials or releases fail
        before minutes of set-up; the pool's lease timing is the worker's. Then the backend
        and this process's worker id: the one the pool gives (a gateway gives its token's
        process one), else one of this node's."""
        hello = self.client.hello(self.stop_event)
        if hello is None:
            raise WorkerShutdown()
        self.settings = dataclasses.replace(
            self.settings, lease_ttl_s=hello["lease_ttl_s"],
            heartbeat_interval_s=hello["heartbeat_interval_s"])
        self.info = detect_backend(self.options.backend)
        node = load_or_create_node(Path(self.settings.home), self.options.name)
        self.worker_id = hello.get("worker_id") or new_worker_id(node)
        return node

    def _app_context(self) -> AppContext:
        """What the apps' runners see of this worker."""
        info = self.info
        assert info is not None
        return AppContext(
            backend=info.backend, device=info.device, device_name=info.device_name,
            worker_id=self.worker_id, worker_name=self.name, memory_total=info.memory_total,
            memory_free=info.memory_free, slowdown=self.options.slowdown,
            options=dict(self.options.app_options))

    def _load_apps(self) -> None:
        """Each app's spec and runner; the runner's setup."""
        for name in self.options.apps:
            app = load_worker_app(name)
            app.runner.setup(self.ctx)
            self.apps[name] = app

    def _registry_fields(self, node: Node, gflops: float | None) -> dict[str, Any]:
        """The worker's registry record: identity, device, capability, benchmarks, labels."""
        assert self.info is not None
        return registry_fields(self.info, node, self.name, self.apps, self.benchmarks,
                               slowdown=self.options.slowdown, gflops=gflops,
                               labels=self.options.labels, price=self.options.cost_per_hour)

    def register(self) -> None:
        """Join (or re-join) the fleet with the capability record and benchmark."""
        # its trust (NOVA_TRUST; a gateway sets its token's instead), whether it can fetch
        # others' results to verify them (a direct worker can), and which of its apps'
        # results cannot be compared (AppSpec.comparable: only validated, never re-run)
        fields = {**self._fields, "trust": self.settings.trust,
                  "verifier": "1" if self.client.verifies else "0"}
        nocompare = [name for name, app in self.apps.items() if not app.spec.comparable]
        if nocompare:
            fields["nocompare"] = ",".join(nocompare)
        self.client.register_worker(
            self.worker_id, fields, list(self.apps),
            {a: b.for_registry() for a, b in self.benchmarks.items()})
        self._registered = True

    # ---- signals --------------------------------------------------------------------------
    def install_signal_handlers(self) -> None:
        """SIGTERM/SIGINT: stop claiming, abandon the running task, release leases. SIGUSR1
        (sent by the heartbeat thread): abandon a batch whose leases are all lost. The
        worker now owns its process: an app that ignores that is ended by an exit."""
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        self.abandon.own_process()

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

    def _on_leases_lost(self, reasons: Mapping[str, str]) -> None:
        """Heartbeat thread: leases were reported lost; abandon a batch that lost them all."""
        lost = self.heartbeat.lost_ids()
        for executor in self.executors.values():
            self.abandon.check(executor, lost, reasons)

    # ---- the loop ----------------------------------------------------------------------
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
        except NoAppError as exc:
            log.error("%s", exc)
            return EXIT_NO_APP
        finally:
            self._shutdown()
        return 0

    def _loop(self) -> None:
        """Claim and run until stopped, ``--burst`` finds nothing, or ``--max-tasks`` is
        reached."""
        assert self.claims is not None
        backoff_s = 0.5
        waiting = False
        while not self.stop_event.is_set():
            if self.claims.reached_max():
                log.info("finished %d task(s) (--max-tasks)", self.tasks_done)
                return
            try:
                # still waiting: note the event stream's position before claiming, so that a
                # job enqueued after this claim round ends the wait below at once
                mark = self.client.event_mark() if waiting else None
                claimed = self._claim_round()
            except WorkerLostError:
                self._rejoin()
                continue
            except redis.RedisError as exc:
                backoff_s = self._back_off(exc, backoff_s)
                continue
            backoff_s = 0.5
            if claimed.ran:
                waiting = False
                self._pause_if_store_failing(claimed.infra_errors)
            elif self.options.burst and all(s in ("empty", "quarantined")
                                            for s in claimed.statuses):
                log.info("no work left for %s (--burst): exiting", ", ".join(self.apps))
                return
            else:
                waiting = True
                self._wait_for_work(mark, claimed.wait_s)

    def _claim_round(self) -> _Round:
        """Claim for each app in turn and run the first that gets leases."""
        assert self.claims is not None
        names = list(self.apps)
        statuses: list[str] = []
        waits: list[float] = []
        for i in range(len(names)):
            app = names[(self._turn + i) % len(names)]
            result = self.claims.claim(app)
            statuses.append(result.status)
            if result.status == "ok":
                # the next round starts with the next app, and this run's last commit
                # already claims for it
                self._turn = (self._turn + i + 1) % len(names)
                outcome = self._execute(app, result.leases, names[self._turn])
                return _Round(True, tuple(statuses), infra_errors=outcome.infra_errors)
            waits.append(result.retry_after_s)
        return _Round(False, tuple(statuses), min(min(waits or [MAX_IDLE_WAIT_S]),
                                                  MAX_IDLE_WAIT_S))

    def _execute(self, app: str, leases: list[Lease], next_app: str) -> RunOutcome:
        """Run claimed leases of ``app``; the run's last commit claims ``next_app``'s next
        tasks in the same call, and the claims take over what it answered."""
        assert self.claims is not None
        self.heartbeat.hold(leases)
        self.claims.note_params(app, leases[-1].params)
        if self.stop_event.is_set():
            raise WorkerShutdown()
        try:
            outcome = self.executors[app].run(
                leases, functools.partial(self.claims.next_claim, next_app))
        finally:
            self.abandon.done()
        self.claims.settle(outcome.committed, outcome.claimed, outcome.in_doubt)
        self.claims.note_timing(app, len(leases), outcome.work_s, outcome.commit_calls,
                                outcome.commit_s)
        if outcome.interrupted:
            raise WorkerShutdown()
        return outcome

    def _rejoin(self) -> None:
        log.warning("not registered (declared lost?): joining again")
        self._retry_redis(self.register)

    def _back_off(self, exc: redis.RedisError, backoff_s: float) -> float:
        """Wait ``backoff_s`` after a Redis error (a stop ends the wait); the next wait."""
        log.warning("Redis unavailable (%s); retrying in %.1f s", exc, backoff_s)
        self.stop_event.wait(backoff_s)
        return min(backoff_s * 2, MAX_BACKOFF_S)

    def _pause_if_store_failing(self, infra_errors: int) -> None:
        """After result-store failures, wait 2, 4, ... up to 30 s before claiming again."""
        if not infra_errors:
            return
        pause = min(MAX_BACKOFF_S, 2.0 ** min(infra_errors, 5))
        log.warning("result store failing: pausing %.0f s before claiming again", pause)
        self.stop_event.wait(pause)

    def _wait_for_work(self, after: str | None, wait_s: float) -> None:
        """Sleep up to ``wait_s`` (the claim's hint), but wake as soon as work arrives (the
        transport knows how: the event stream, or a gateway's long-polled claim)."""
        self.client.wait_for_work(after, wait_s, self.stop_event)

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
            except (redis.RedisError, NovaError) as exc:
                log.warning("could not deregister (%s); leases expire on their own", exc)
        self.abandon.exit_if_slots_run_on()  # a slot's app that never returns: exit 75
        for app in self.apps.values():
            try:
                app.runner.teardown()
            except Exception as exc:  # noqa: BLE001 - best effort on the way out
                log.warning("teardown of %s failed: %s", app.name, exc)
        if heartbeat is not None and heartbeat.is_alive():
            heartbeat.join(timeout=self.settings.heartbeat_interval_s + 5)
        if self._registered:
            log.info("worker stopped after %d task(s)", self.tasks_done)
