"""Runs leased tasks and commits their results: run -> upload (write-once) -> commit.

A result is uploaded under a key that contains job, task, ``lease_gen`` and
``attempt_id``, then committed through the fenced ``complete`` script — for the last task
of a claim, ``complete_claim``, which also claims the worker's next tasks in the same
round trip (the runtime says for which app and with which attempt ids). A commit rejected
as stale deletes its orphan object; a commit whose outcome is unknown (Redis
unreachable) never deletes anything, so no committed task can point at a missing object.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import redis

from nova_queue.apps.base import AppContext, TaskInput, TaskOutput
from nova_queue.client import NovaClient
from nova_queue.errors import ObjectExistsError, StaleResultError, StoreError
from nova_queue.models import ClaimResult, Lease
from nova_queue.stores import ResultStore, result_key
from nova_queue.stores.base import encode_metadata_value
from nova_queue.workers.apps import AppRunner, WorkerApp
from nova_queue.workers.heartbeat import Heartbeat

log = logging.getLogger(__name__)

#: How long a worker keeps retrying a commit while Redis is unreachable.
COMMIT_RETRY_S = 60.0
#: Longest prompt excerpt stored in object metadata (encoded bytes).
PROMPT_META_BYTES = 600


class WorkerShutdown(BaseException):
    """Raised inside a running task when the worker is told to stop (SIGTERM/SIGINT)."""


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


def _fit(value: str, limit: int) -> str:
    while value and len(encode_metadata_value(value)) > limit:
        value = value[: max(len(value) * 3 // 4, len(value) - 64)]
    return value


class Executor:
    """Runs groups of leases of one app for one worker."""

    def __init__(self, client: NovaClient, store: ResultStore, app: WorkerApp, ctx: AppContext,
                 heartbeat: Heartbeat):
        self.client, self.store, self.ctx = client, store, ctx
        self.spec, self.runner = app.spec, app.runner
        self.heartbeat = heartbeat
        self.worker_id = ctx.worker_id
        self.ran_once = False
        #: True while the app runs a batch: the only time a stop signal may interrupt
        self.in_app = False
        self.committed = 0
        self.failed = 0
        self.stale = 0
        self.infra_errors = 0
        #: the commit of this task also claims: ``then_claim()`` gives (app, attempt ids)
        self._final: str | None = None
        self._then_claim: Callable[[], tuple[str, list[str]] | None] | None = None
        #: what that claim answered, for the runtime: (app, result)
        self.claimed: tuple[str, ClaimResult] | None = None
        #: attempt ids of a commit-and-claim whose outcome is unknown (Redis unreachable):
        #: the runtime's next claim for that app retries with them and gets those leases
        self.claim_in_doubt: tuple[str, list[str]] | None = None

    def run(self, leases: list[Lease],
            then_claim: Callable[[], tuple[str, list[str]] | None] | None = None) -> None:
        """Run leases (any jobs), one batch per job and batch size. With ``then_claim``,
        the commit of the last task claims next in the same call if ``then_claim()`` says
        for which app (None: no claim); the answer is left in ``claimed``."""
        by_job: dict[str, list[Lease]] = {}
        for lease in leases:
            by_job.setdefault(lease.job_id, []).append(lease)
        groups = list(by_job.values())
        self.claimed = self.claim_in_doubt = None
        self._final = groups[-1][-1].task_id if then_claim and groups else None
        self._then_claim = then_claim
        try:
            for group in groups:
                self._run_job_group(group)
        finally:
            self._final = self._then_claim = None

    def _run_job_group(self, leases: list[Lease]) -> None:
        try:
            params = self.spec.parse_params(leases[0].params)
            started = time.perf_counter()
            loaded = self.runner.prepare(params)
            load_s = time.perf_counter() - started
            size = max(1, int(self.runner.batch_size(params)))
        except WorkerShutdown:
            raise
        except Exception as exc:  # noqa: BLE001 - any app failure is reported, not fatal
            log.warning("job %s cannot run here: %s", leases[0].job_id, exc)
            for lease in leases:
                self._fail(lease, self.runner.classify_error(exc), f"{type(exc).__name__}: {exc}")
            return
        if loaded:
            log.info("loaded %s for job %s in %.2f s", self.spec.name, leases[0].job_id, load_s)
            self.ran_once = False
        for i in range(0, len(leases), size):
            self._run_batch(leases[i:i + size], params)

    def _run_batch(self, leases: list[Lease], params: dict[str, Any]) -> None:
        live = [lease for lease in leases if not self._lost(lease)]
        if not live:
            return
        warm = self.ran_once
        try:
            self.in_app = True
            outputs, elapsed = run_app(self.runner, self.ctx, [task_input(l, params) for l in live])
        except WorkerShutdown:
            raise
        except Exception as exc:  # noqa: BLE001 - report and move on
            kind = self.runner.classify_error(exc)
            log.warning("%s: %s on %d task(s): %s", self.spec.name, kind, len(live), exc)
            for lease in live:
                self._fail(lease, kind, f"{type(exc).__name__}: {exc}")
            return
        finally:
            self.in_app = False
        self.ran_once = True
        total_cost = sum(lease.cost for lease in live) or 1.0
        for lease, output in zip(live, outputs):
            if isinstance(output, BaseException):
                kind = self.runner.classify_error(output)
                log.warning("%s: %s on %s: %s", self.spec.name, kind, lease.task_id, output)
                self._fail(lease, kind, f"{type(output).__name__}: {output}")
                continue
            self._commit(lease, output, elapsed * lease.cost / total_cost, warm)

    def _lost(self, lease: Lease) -> bool:
        if self.heartbeat.is_lost(lease):
            log.info("dropping %s: its lease was lost", lease.task_id)
            self.heartbeat.drop(lease)
            self.stale += 1
            return True
        return False

    def _commit(self, lease: Lease, output: TaskOutput, run_s: float, warm: bool) -> None:
        if self._lost(lease):
            return
        key = result_key(lease.job_id, lease.index, lease.lease_gen, lease.attempt_id,
                         output.extension)
        meta = {
            "job": lease.job_id, "task": lease.task_id, "lease-gen": str(lease.lease_gen),
            "attempt-id": lease.attempt_id, "app": self.spec.name, "backend": self.ctx.backend,
            "worker": _fit(self.ctx.worker_name, 200), "worker-id": self.worker_id,
            "prompt": _fit(lease.input, PROMPT_META_BYTES),
        }
        try:
            self.store.put(key, output.data, output.content_type, meta)
        except ObjectExistsError:
            # our own retried put (its first reply was lost) if the attempt id matches
            try:
                info = self.store.head(key)
            except StoreError as exc:
                log.warning("store failed for %s: %s", lease.task_id, exc)
                self.infra_errors += 1
                self._fail(lease, "infra", f"result store unavailable: {exc}")
                return
            if not (info and info.metadata.get("attempt-id") == lease.attempt_id):
                self._fail(lease, "infra", f"result key {key} is taken by another object")
                return
        except StoreError as exc:
            log.warning("store failed for %s: %s", lease.task_id, exc)
            self.infra_errors += 1
            self._fail(lease, "infra", f"result store unavailable: {exc}")
            return
        provenance = {k: str(v) for k, v in output.metadata.items()}
        provenance.update(backend=self.ctx.backend, device=self.ctx.device_name,
                          worker=self.ctx.worker_name, content_type=output.content_type,
                          bytes=str(len(output.data)))
        plan = (self._then_claim() if self._then_claim and lease.task_id == self._final
                else None)
        deadline = time.monotonic() + COMMIT_RETRY_S
        while True:
            try:
                if plan is None:
                    self.client.complete(self.worker_id, lease, key, run_s=run_s,
                                                warm=warm, meta=provenance)
                else:
                    _, claimed = self.client.complete_and_claim(
                        self.worker_id, lease, key, run_s=run_s, warm=warm, meta=provenance,
                        app=plan[0], attempt_ids=plan[1])
                    if claimed is not None:  # None: not registered; the next claim says so
                        self.claimed = (plan[0], claimed)
                self.committed += 1
                break
            except StaleResultError as exc:
                log.warning("%s; deleting orphan %s", exc, key)
                self.stale += 1
                self._delete_orphan(key)
                break
            except redis.RedisError as exc:
                if time.monotonic() > deadline:
                    # outcome unknown: keep the object, the lease will be reaped if it was lost
                    log.error("could not commit %s (%s); leaving it to lease expiry",
                              lease.task_id, exc)
                    self.claim_in_doubt = plan
                    break
                log.warning("commit of %s failed (%s); retrying", lease.task_id, exc)
                time.sleep(1.0)
        self.heartbeat.drop(lease)

    def _delete_orphan(self, key: str) -> None:
        try:
            self.store.delete(key)
        except StoreError as exc:
            log.warning("could not delete orphan %s: %s", key, exc)

    def _fail(self, lease: Lease, kind: str, message: str) -> None:
        self.heartbeat.drop(lease)
        self.failed += 1
        try:
            self.client.fail(self.worker_id, lease, kind, message)
        except StaleResultError as exc:
            log.info("failure report for %s not needed: %s", lease.task_id, exc)
        except redis.RedisError as exc:
            log.warning("could not report failure of %s (%s); lease expiry will requeue it",
                        lease.task_id, exc)
