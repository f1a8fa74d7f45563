"""Runs leased tasks and commits their results: run -> upload (write-once) -> commit.

A result is uploaded under a key that contains job, task, ``lease_gen`` and ``attempt_id``
(through the worker's transport, ``workers/transport.py``), then committed through the
fenced scripts (:mod:`~nova_queue.workers.commits`): a run's results wait (at most
:data:`MAX_HOLD_S`, at most 64) and go in one ``complete_batch`` call, and a single result
through ``complete``, directly or through a gateway alike. The run's last call also claims the next tasks in the same round trip
(:class:`~nova_queue.workers.claims.Claims` says for which app, with which attempt ids), and
:class:`RunOutcome` hands their leases back. A commit rejected as stale or refused (its task
then fails) deletes its orphan object; one whose outcome is unknown (Redis unreachable for
``COMMIT_RETRY_S``, or a stop while retrying) never deletes anything, so no committed task
can point at a missing object, and a lost lease is left to expiry.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import redis

from nova_queue.apps.base import AppContext, TaskInput, TaskOutput
from nova_queue.errors import (
    ObjectExistsError,
    ResultTooLargeError,
    StaleResultError,
    StoreError,
)
from nova_queue.limits import MAX_CLAIM_K
from nova_queue.models import ClaimResult, Lease
from nova_queue.stores import result_key
from nova_queue.stores.base import fit_metadata_value as _fit
from nova_queue.workers.apps import AppRunner, WorkerApp
from nova_queue.workers.claims import NextClaim
from nova_queue.workers.commits import Commit, Committer, Ready
from nova_queue.workers.heartbeat import Heartbeat
from nova_queue.workers.loading import ModelLoads
from nova_queue.workers.prepare import failure_reason
from nova_queue.workers.slots import run_batches
from nova_queue.workers.transport import WorkerTransport

log = logging.getLogger(__name__)

#: Longest a run holds an uploaded result before it commits the results it holds (checked
#: before each batch the app runs; a run's last results go with its last call).
MAX_HOLD_S = 0.25
#: Longest prompt excerpt stored in object metadata (encoded bytes).
PROMPT_META_BYTES = 600


class WorkerShutdown(BaseException):
    """Raised inside a running task when the worker is told to stop (SIGTERM/SIGINT)."""


class TaskAbandoned(BaseException):
    """Raised inside a running batch whose every lease is lost (it ran past its run-time
    limit, or another attempt of it committed first): its result is no longer wanted."""


@dataclasses.dataclass
class RunOutcome:
    """What one run of leases did, and what its last commit claimed next."""

    committed: int = 0
    failed: int = 0
    stale: int = 0
    #: result-store failures (the worker pauses before claiming again)
    infra_errors: int = 0
    #: (app, answer) of the last commit's combined claim: the worker's next claim
    claimed: tuple[str, ClaimResult] | None = None
    #: a combined claim whose outcome is unknown: the next claim retries its attempt ids
    in_doubt: NextClaim | None = None
    #: a stop signal interrupted the app; the leases left are released on shutdown
    interrupted: bool = False
    #: tasks dropped while running: their leases were lost (timeout, superseded)
    abandoned: int = 0
    #: seconds the run spent outside commit calls, and in its commit calls (how many)
    work_s: float = 0.0
    commit_s: float = 0.0
    commit_calls: int = 0


@dataclasses.dataclass
class _Run:
    """One call of :meth:`Executor.run`: its outcome so far and how its last commit claims."""

    outcome: RunOutcome
    next_claim: Callable[[int], NextClaim | None] | None
    #: uploaded results not committed yet (batched commits), and since when
    ready: list[Ready] = dataclasses.field(default_factory=list)
    ready_since: float = 0.0


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
    return outputs, elapsed


def task_input(lease: Lease, params: dict[str, Any]) -> TaskInput:
    """What an app sees of a lease."""
    return TaskInput(task_id=lease.task_id, job_id=lease.job_id, index=lease.index,
                     input=lease.input, cost=lease.cost, params=params,
                     attempt=lease.attempt, lease_gen=lease.lease_gen,
                     attempt_id=lease.attempt_id)


class Executor:
    """Runs groups of leases of one app for one worker. ``warm``: the runner already ran
    (the startup benchmark), so the first run counts as warm. ``slots``: batches of one job
    it may run at once (workers/slots.py)."""

    def __init__(self, client: WorkerTransport, app: WorkerApp, ctx: AppContext,
                 heartbeat: Heartbeat, stop_event: threading.Event, *, warm: bool = False,
                 slots: int = 1):
        self.client, self.ctx = client, ctx
        self.spec, self.runner = app.spec, app.runner
        self.heartbeat = heartbeat
        self.stop_event = stop_event
        self.worker_id = ctx.worker_id
        self.ran_once = warm
        #: True while the app runs a batch: the only time a stop signal may interrupt
        self.in_app = False
        #: the task ids of the batch the app runs, and a number per batch: the worker
        #: abandons a batch whose every lease is lost (TaskAbandoned)
        self.running: frozenset[str] = frozenset()
        self.batch_seq = 0
        self.committer = Committer(client, self.worker_id, stop_event)
        #: task slots (``--concurrency``): batches of a run the app may run at once
        self.slots = max(1, slots)
        #: its model loads, recorded and logged (workers/loading.py)
        self.loads = ModelLoads(client, self.worker_id, self.spec.name)

    # ---- a run: groups by job, batches by batch size ---------------------------------------
    def run(self, leases: list[Lease],
            next_claim: Callable[[int], NextClaim | None] | None = None) -> RunOutcome:
        """Run leases (any jobs), one batch per job and batch size, and return what was done.
        With ``next_claim``, the commit of the last task asks it (with the run's commits
        so far) what to claim in the same call; the answer is in ``RunOutcome.claimed``."""
        by_job: dict[str, list[Lease]] = {}
        for lease in leases:
            by_job.setdefault(lease.job_id, []).append(lease)
        groups = list(by_job.values())
        run = _Run(RunOutcome(), next_claim)
        started, calls_s, calls = time.perf_counter(), self.committer.calls_s, self.committer.calls
        try:
            for group in groups:
                self._run_job_group(run, group)
        except WorkerShutdown:
            run.outcome.interrupted = True
        self._flush(run, last=not run.outcome.interrupted)
        out = run.outcome
        out.commit_s, out.commit_calls = (self.committer.calls_s - calls_s,
                                          self.committer.calls - calls)
        out.work_s = time.perf_counter() - started - out.commit_s
        return out

    def _run_job_group(self, run: _Run, leases: list[Lease]) -> None:
        try:
            params = self.spec.parse_params(leases[0].params)
            started = time.perf_counter()
            with self.loads.preparing(self.spec.model_key(params), leases[0].job_id) as prep:
                prep.loaded = loaded = self.runner.prepare(params)
            load_s = time.perf_counter() - started
            size = max(1, int(self.runner.batch_size(params)))
        except WorkerShutdown:
            raise
        except Exception as exc:  # noqa: BLE001 - this worker's failure, not the job's
            reason = failure_reason(self.runner, exc)  # the leases go back: no attempt used
            log.warning("cannot prepare job %s here; handing back %d task(s): %s",
                        leases[0].job_id, len(leases), reason)
            for lease in leases:
                self._fail(run, lease, "prepare", reason)
            return
        if loaded:
            log.info("loaded %s for job %s in %.2f s", self.spec.name, leases[0].job_id, load_s)
            self.ran_once = False
            self.loads.record(self.spec.model_key(params), load_s)
        batches = [leases[i:i + size] for i in range(0, len(leases), size)]
        if self.slots > 1 and len(batches) > 1:
            run_batches(self, run, batches, params)  # up to `slots` batches at once
            return
        for batch in batches:
            self._run_batch(run, batch, params)

    def _run_batch(self, run: _Run, leases: list[Lease], params: dict[str, Any]) -> None:
        if run.ready and time.perf_counter() - run.ready_since >= MAX_HOLD_S:
            self._flush(run, last=False)
        live = [lease for lease in leases if not self._lost(run, lease)]
        if not live:
            return
        try:
            self._run_live(run, live, params)
        except TaskAbandoned:
            # every lease of the batch was lost while the app ran: drop it, run on
            log.warning("abandoned %d task(s) of %s while running: %s", len(live),
                        self.spec.name, ", ".join(lease.task_id for lease in live))
            for lease in live:
                self.heartbeat.drop(lease)
            run.outcome.abandoned += len(live)

    def _run_live(self, run: _Run, live: list[Lease], params: dict[str, Any]) -> None:
        warm = self.ran_once
        try:
            self.batch_seq += 1
            self.running = frozenset(lease.task_id for lease in live)
            self.in_app = True
            outputs, elapsed = run_app(self.runner, self.ctx,
                                       [task_input(lease, params) for lease in live])
        except (WorkerShutdown, TaskAbandoned):
            raise
        except Exception as exc:  # noqa: BLE001 - report and move on
            self._batch_failed(run, live, exc)
            return
        finally:
            self.in_app = False
            self.running = frozenset()
        self._take_outputs(run, live, outputs, elapsed, warm)

    def _take_result(self, run: _Run, live: list[Lease], done: Any, warm: bool) -> None:
        """A batch a task slot ran (``done``: its future): its outputs, or its failure."""
        try:
            outputs, elapsed = done.result()
        except Exception as exc:  # noqa: BLE001 - report and move on
            self._batch_failed(run, live, exc)
            return
        self._take_outputs(run, live, outputs, elapsed, warm)

    def _batch_failed(self, run: _Run, live: list[Lease], exc: Exception) -> None:
        kind = self.runner.classify_error(exc)
        log.warning("%s: %s on %d task(s): %s", self.spec.name, kind, len(live), exc)
        for lease in live:
            self._fail(run, lease, kind, f"{type(exc).__name__}: {exc}", batch=len(live))

    def _take_outputs(self, run: _Run, live: list[Lease], outputs: list, elapsed: float,
                      warm: bool) -> None:
        """A batch's outputs: each result uploaded and committed, each error reported."""
        self.ran_once = True
        total_cost = sum(lease.cost for lease in live) or 1.0
        for lease, output in zip(live, outputs):
            if isinstance(output, BaseException):
                kind = self.runner.classify_error(output)
                log.warning("%s: %s on %s: %s", self.spec.name, kind, lease.task_id, output)
                self._fail(run, lease, kind, f"{type(output).__name__}: {output}",
                           batch=len(live))
                continue
            self._finish(run, lease, output, elapsed * lease.cost / total_cost, warm)

    def _lost(self, run: _Run, lease: Lease) -> bool:
        if self.heartbeat.is_lost(lease):
            log.info("dropping %s: its lease was lost", lease.task_id)
            self.heartbeat.drop(lease)
            run.outcome.stale += 1
            return True
        return False

    # ---- a task's result: upload, commit, settle ---------------------------------------------
    def _finish(self, run: _Run, lease: Lease, output: TaskOutput, run_s: float,
                warm: bool) -> None:
        """Upload the result and hold it for the run's next commit call (:meth:`_flush`)."""
        if self._lost(run, lease):
            return
        key = self._upload(run, lease, output)
        if key is None:
            return  # reported as failed
        if not run.ready:
            run.ready_since = time.perf_counter()
        run.ready.append(Ready(lease, key, run_s, warm, self._provenance(output)))
        if len(run.ready) >= MAX_CLAIM_K:
            self._flush(run, last=False)

    def _flush(self, run: _Run, *, last: bool) -> None:
        """Commit the results the run holds in one call; ``last``: the run's last call,
        which also claims what ``next_claim`` says (with the run's commits so far)."""
        ready, run.ready = run.ready, []
        if not ready:
            return
        plan = (run.next_claim(run.outcome.committed + len(ready) - 1)
                if last and run.next_claim is not None else None)
        commits = (self.committer.many(ready, plan) if len(ready) > 1
                   else [self.committer.one(ready[0], plan)])
        for i, (r, commit) in enumerate(zip(ready, commits, strict=True)):
            self._settle(run, r, plan if i == len(ready) - 1 else None, commit)
            self.heartbeat.drop(r.lease)

    def _upload(self, run: _Run, lease: Lease, output: TaskOutput) -> str | None:
        """Put the result under its write-once key; the key, or None after reporting why not."""
        key = result_key(lease.job_id, lease.index, lease.lease_gen, lease.attempt_id,
                         output.extension)
        try:
            self.client.upload(key, output.data, output.content_type, self._object_meta(lease))
        except ObjectExistsError:
            self._fail(run, lease, "infra", f"result key {key} is taken by another object")
            return None
        except ResultTooLargeError as exc:  # the gateway's limit: a task error, not the store's
            self._fail(run, lease, "error", str(exc))
            return None
        except StoreError as exc:
            self._store_failed(run, lease, exc)
            return None
        return key

    def _store_failed(self, run: _Run, lease: Lease, exc: StoreError) -> None:
        log.warning("store failed for %s: %s", lease.task_id, exc)
        run.outcome.infra_errors += 1
        self._fail(run, lease, "infra", f"result store unavailable: {exc}")

    def _object_meta(self, lease: Lease) -> dict[str, str]:
        """The stored object's metadata: whose result it is, for audits and retried puts."""
        return {
            "job": lease.job_id, "task": lease.task_id, "lease-gen": str(lease.lease_gen),
            "attempt-id": lease.attempt_id, "app": self.spec.name, "backend": self.ctx.backend,
            "worker": _fit(self.ctx.worker_name, 200), "worker-id": self.worker_id,
            "prompt": _fit(lease.input, PROMPT_META_BYTES),
        }

    def _provenance(self, output: TaskOutput) -> dict[str, str]:
        """The task's ``meta``: the app's metadata plus where and how big the result is."""
        provenance = {k: str(v) for k, v in output.metadata.items()}
        provenance.update(backend=self.ctx.backend, device=self.ctx.device_name,
                          worker=self.ctx.worker_name, content_type=output.content_type,
                          bytes=str(len(output.data)))
        return provenance

    def _settle(self, run: _Run, r: Ready, plan: NextClaim | None, commit: Commit) -> None:
        """Count the commit; keep what it claimed; a stale or refused one deletes its object
        (its attempt's own), a refused one fails its task; one in doubt keeps its object."""
        if commit.state == "committed":
            run.outcome.committed += 1
            if plan is not None and commit.claimed is not None:
                run.outcome.claimed = (plan.app, commit.claimed)
        elif commit.state in ("stale", "refused"):
            log.warning("%s; deleting orphan %s", commit.error, r.key)
            try:
                self.client.discard(r.key)
            except StoreError as exc:
                log.warning("could not delete orphan %s: %s", r.key, exc)
            if commit.state == "stale":
                run.outcome.stale += 1
            else:
                self._fail(run, r.lease, "error", f"its commit was refused: {commit.error}")
        else:
            run.outcome.in_doubt = plan

    def _fail(self, run: _Run, lease: Lease, kind: str, message: str, *, batch: int = 1) -> None:
        self.heartbeat.drop(lease)
        run.outcome.failed += 1
        try:
            self.client.fail(self.worker_id, lease, kind, message, batch=batch)
        except StaleResultError as exc:
            log.info("failure report for %s not needed: %s", lease.task_id, exc)
        except redis.RedisError as exc:
            log.warning("could not report failure of %s (%s); lease expiry will requeue it",
                        lease.task_id, exc)
