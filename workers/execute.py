"""Runs leased tasks: run -> upload -> commit, each a named step.

An :class:`Executor` runs the leases of one app for one worker: grouped by job (each
prepared once: a model load is recorded, ``loading.py``), cut into batches of the runner's
batch size, each batch run by the app, one at a time in the worker's main thread or, with
``--concurrency``, up to ``slots`` batches of a job at once on task-slot threads
(:class:`~nova_queue.workers.slots.SlotPool`, which only runs the app). The batch the app
runs now is a :class:`RunningBatch`, owned by the executor: the abandonment reads it from
the heartbeat thread (every lease of it lost: :mod:`~nova_queue.workers.abandon`), and a
stop signal interrupts only while the main thread is in the app. What becomes of the
outputs (upload, held commits, the next claim in the run's last call) is the
:class:`~nova_queue.workers.outputs.Run`'s, and :class:`RunOutcome` hands back what the
run did and claimed.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import functools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from nova_queue.apps.base import AppContext, TaskInput, TaskOutput
from nova_queue.errors import InvalidOutput
from nova_queue.models import Lease
from nova_queue.workers.abandon import DroppedBatches, TaskAbandoned
from nova_queue.workers.apps import AppRunner, WorkerApp
from nova_queue.workers.claims import NextClaim
from nova_queue.workers.commits import Committer
from nova_queue.workers.heartbeat import Heartbeat
from nova_queue.workers.loading import ModelLoads
from nova_queue.workers.outputs import Run, RunOutcome
from nova_queue.workers.prepare import failure_reason
from nova_queue.workers.slots import SlotPool
from nova_queue.workers.transport import WorkerTransport

log = logging.getLogger(__name__)

class WorkerShutdown(BaseException):
    """Raised inside a running task when the worker is told to stop (SIGTERM/SIGINT)."""


@dataclasses.dataclass(frozen=True)
class RunningBatch:
    """The batch an executor's app runs now: its number (``seq``, one per batch, or per
    job's batches run in task slots), its tasks, and whether the main thread is in the app
    (``in_app``; with task slots, waiting for them), the only time a stop or an abandonment
    may interrupt it. Replaced whole, never changed: another thread reads one batch."""

    seq: int
    task_ids: frozenset[str]
    in_app: bool = True

    def all_lost(self, lost: frozenset[str]) -> bool:
        """Whether the main thread is in the app and every lease of the batch is lost."""
        return self.in_app and bool(self.task_ids) and self.task_ids <= lost


def run_app(runner: AppRunner, ctx: AppContext, tasks: Sequence[TaskInput]
            ) -> tuple[list[TaskOutput | BaseException], float]:
    """Run one batch; returns outputs and wall seconds, simulated slowdown included."""
    started = time.perf_counter()
    outputs = runner.run_batch(tasks)
    elapsed = time.perf_counter() - started
    if ctx.slowdown > 1 and not runner.handles_slowdown:
        # simulate hardware `slowdown` times slower (documented as a simulation)
        time.sleep(elapsed * (ctx.slowdown - 1))
        elapsed = time.perf_counter() - started
    if len(outputs) != len(tasks):
        raise RuntimeError(f"app {runner.name} returned {len(outputs)} outputs for "
                           f"{len(tasks)} tasks")
    return [checked(runner, output) for output in outputs], elapsed


def checked(runner: AppRunner, output: TaskOutput | BaseException
            ) -> TaskOutput | BaseException:
    """``output`` if the runner's ``validate`` passes it (or it is an error already), else
    the :class:`InvalidOutput` that rejects it: nothing of it is stored or committed."""
    if isinstance(output, BaseException):
        return output
    try:
        runner.validate(output)
    except InvalidOutput as exc:
        return exc
    return output


def task_input(lease: Lease, params: dict[str, Any]) -> TaskInput:
    """What an app sees of a lease."""
    return TaskInput(task_id=lease.task_id, job_id=lease.job_id, index=lease.index,
                     input=lease.input, cost=lease.cost, params=params,
                     attempt=lease.attempt, lease_gen=lease.lease_gen,
                     attempt_id=lease.attempt_id)


class Executor:
    """Runs groups of leases of one app for one worker, through its ``transport``.
    ``warm``: the runner already ran (the startup benchmark), so the first run counts as
    warm. ``slots``: batches of one job it may run at once (workers/slots.py), whose
    batches dropped while running are noted in ``dropped`` (the abandonment's)."""

    def __init__(self, transport: WorkerTransport, app: WorkerApp, ctx: AppContext,
                 heartbeat: Heartbeat, stop_event: threading.Event, *, warm: bool = False,
                 slots: int = 1, dropped: DroppedBatches | None = None):
        self.transport, self.ctx = transport, ctx
        self.spec, self.runner = app.spec, app.runner
        self.heartbeat = heartbeat
        self.stop_event = stop_event
        self.worker_id = ctx.worker_id
        self.ran_once = warm
        #: the batch the app runs now (None: none)
        self.batch: RunningBatch | None = None
        self._seq = 0
        self.committer = Committer(transport, self.worker_id, stop_event)
        #: task slots (``--concurrency``): batches of a run the app may run at once
        self.slots = max(1, slots)
        self.dropped = dropped if dropped is not None else DroppedBatches()
        #: its model loads, recorded and logged (workers/loading.py)
        self.loads = ModelLoads(transport, self.worker_id, self.spec.name)

    @property
    def in_app(self) -> bool:
        """Whether the main thread is in the app now (a stop signal may interrupt it)."""
        batch = self.batch
        return batch is not None and batch.in_app

    def runs(self, seq: int) -> bool:
        """Whether the main thread is in the app, running batch ``seq``."""
        batch = self.batch
        return batch is not None and batch.in_app and batch.seq == seq

    # ---- a run: groups by job, batches by batch size ---------------------------------------
    def run(self, leases: list[Lease],
            next_claim: Callable[[int], NextClaim | None] | None = None) -> RunOutcome:
        """Run leases (any jobs), one batch per job and batch size, and return what was done.
        With ``next_claim``, the run's last commit call asks it (with the run's commits
        before it) what to claim in the same call; the answer is in ``RunOutcome.claimed``."""
        by_job: dict[str, list[Lease]] = {}
        for lease in leases:
            by_job.setdefault(lease.job_id, []).append(lease)
        run = Run(self.transport, self.committer, self.heartbeat, self.spec.name, self.runner,
                  self.ctx, next_claim=next_claim)
        started, calls_s, calls = time.perf_counter(), self.committer.calls_s, self.committer.calls
        try:
            for group in by_job.values():
                self._run_job_group(run, group)
        except WorkerShutdown:
            run.outcome.interrupted = True
        run.flush(last=not run.outcome.interrupted)
        out = run.outcome
        out.commit_s, out.commit_calls = (self.committer.calls_s - calls_s,
                                          self.committer.calls - calls)
        out.work_s = time.perf_counter() - started - out.commit_s
        return out

    def _run_job_group(self, run: Run, leases: list[Lease]) -> None:
        prepared = self._prepare(run, leases)
        if prepared is None:
            return
        params, size = prepared
        batches = [leases[i:i + size] for i in range(0, len(leases), size)]
        if self.slots > 1 and len(batches) > 1:
            self._run_in_slots(run, batches, params)  # up to `slots` batches at once
            return
        for batch in batches:
            self._run_batch(run, batch, params)

    def _prepare(self, run: Run, leases: list[Lease]) -> tuple[dict[str, Any], int] | None:
        """The job's params and batch size, its runner prepared (a model load recorded);
        None when this worker cannot prepare it: its leases go back, no attempt used."""
        job = leases[0].job_id
        try:
            params = self.spec.parse_params(leases[0].params)
            started = time.perf_counter()
            with self.loads.preparing(self.spec.model_key(params), job) as prep:
                prep.loaded = loaded = self.runner.prepare(params)
            load_s = time.perf_counter() - started
            size = max(1, int(self.runner.batch_size(params)))
        except Exception as exc:  # noqa: BLE001 - this worker's failure, not the job's
            reason = failure_reason(self.runner, exc)
            log.warning("cannot prepare job %s here; handing back %d task(s): %s",
                        job, len(leases), reason)
            for lease in leases:
                run.fail(lease, "prepare", reason)
            return None
        if loaded:
            log.info("loaded %s for job %s in %.2f s", self.spec.name, job, load_s)
            self.ran_once = False
            self.loads.record(self.spec.model_key(params), load_s)
        return params, size

    # ---- a batch: in the main thread, or in task slots ---------------------------------------
    def _run_batch(self, run: Run, leases: list[Lease], params: dict[str, Any]) -> None:
        """Run one batch in the main thread; its outputs go to the run."""
        run.flush_if_due()
        live = run.live(leases)
        if not live:
            return
        warm = self.ran_once
        self._seq += 1
        try:
            try:
                self.batch = RunningBatch(self._seq, frozenset(x.task_id for x in live))
                outputs, elapsed = self._app_batch(params, live)
            finally:
                self.batch = None
        except TaskAbandoned:  # every lease of the batch was lost while the app ran
            run.abandoned(live)
            return
        except Exception as exc:  # noqa: BLE001 - report and move on
            run.batch_failed(live, exc)
            return
        self.ran_once = True
        run.take_outputs(live, outputs, elapsed, warm)

    def _run_in_slots(self, run: Run, batches: list[list[Lease]],
                      params: dict[str, Any]) -> None:
        """Run a job's batches on up to ``slots`` threads; the main thread takes each
        batch's outputs as it ends and commits the held results when they are due."""
        live = [b for b in (run.live(batch) for batch in batches) if b]
        if not live:
            return
        warm = self.ran_once
        self._seq += 1
        pool = SlotPool(self.spec.name, self.slots, self.dropped)
        try:
            pool.start(live, functools.partial(self._app_batch, params))
            while pool.running:
                for leases, done in self._wait_in_slots(pool, run.hold_left()):
                    self._take(run, leases, done, warm)
                run.flush_if_due()
        except TaskAbandoned:
            run.abandoned([x for batch in pool.running for x in batch])
        finally:
            self.batch = None
            pool.close()

    def _wait_in_slots(self, pool: SlotPool, hold_s: float | None
                       ) -> list[tuple[list[Lease], cf.Future]]:
        """Wait, in the app, for a slot's batch to end (or ``hold_s``: the held results
        are due)."""
        running = pool.task_ids()
        if running <= self.heartbeat.lost_ids():
            # the leases of the batches left were lost while other slots ran: the
            # heartbeat abandons only when a loss is reported, so drop them here
            raise TaskAbandoned()
        self.batch = RunningBatch(self._seq, running)
        try:
            if self.stop_event.is_set():  # the signal came while this thread committed
                raise WorkerShutdown()
            return pool.wait(hold_s)
        finally:
            self.batch = RunningBatch(self._seq, running, in_app=False)

    def _take(self, run: Run, leases: list[Lease], done: cf.Future, warm: bool) -> None:
        """A batch a task slot ran: its outputs, or its failure, to the run."""
        try:
            outputs, elapsed = done.result()
        except Exception as exc:  # noqa: BLE001 - report and move on
            run.batch_failed(leases, exc)
            return
        self.ran_once = True
        run.take_outputs(leases, outputs, elapsed, warm)

    def _app_batch(self, params: dict[str, Any], leases: list[Lease]
                   ) -> tuple[list[TaskOutput | BaseException], float]:
        """The app runs one batch of leases (in the main thread, or on a task slot)."""
        return run_app(self.runner, self.ctx, [task_input(x, params) for x in leases])
