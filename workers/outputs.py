"""One run of leases, from the app's outputs to their commits: :class:`Run`.

Each output is uploaded under a key that contains job, task, ``lease_gen`` and
``attempt_id`` (write-once, through the worker's transport) — or, when it is small (1 to the
transport's ``inline_limit`` bytes, ``NOVA_INLINE_RESULT_BYTES``), carried by its commit and
written to Redis with it (nova_queue/results.py) — then held: a run's results
wait (at most :data:`MAX_HOLD_S`, at most 64) and go in one ``complete_batch`` call, and a
single result through ``complete`` (:mod:`~nova_queue.workers.commits`), in both modes. The
run's last call also claims the next tasks in the same round trip (its ``next_claim`` says
for which app, with which attempt ids), and :class:`RunOutcome` hands their leases back. A
commit rejected as stale or refused (its task then fails) discards its result; one whose
outcome is unknown (the pool unreachable for ``COMMIT_RETRY_S``, or a stop while retrying)
never deletes anything, so no committed task can point at a missing object, and a lost
lease is left to expiry. An output, or an error, is reported once per lease: failed runs
and errors go through ``fail``; an output the runner's ``validate`` rejected (an
:class:`~nova_queue.errors.InvalidOutput`, never uploaded) with kind ``invalid``.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import redis

from nova_queue.apps.base import AppContext, TaskOutput
from nova_queue.errors import (
    InvalidOutput,
    NovaError,
    ObjectExistsError,
    ObjectNotFoundError,
    ResultTooLargeError,
    StaleResultError,
    StoreError,
)
from nova_queue.limits import MAX_CLAIM_K
from nova_queue.models import ClaimResult, Lease
from nova_queue.stores import result_key
from nova_queue.stores.base import fit_metadata_value as _fit
from nova_queue.workers.claims import NextClaim
from nova_queue.workers.commits import Commit, Committer, Ready
from nova_queue.workers.heartbeat import Heartbeat

if TYPE_CHECKING:
    from nova_queue.workers.apps import AppRunner
    from nova_queue.workers.transport import WorkerTransport

log = logging.getLogger(__name__)

#: Longest a run holds an uploaded result before it commits the results it holds (checked
#: before each batch the app runs; a run's last results go with its last call).
MAX_HOLD_S = 0.25
#: Longest prompt excerpt stored in object metadata (encoded bytes).
PROMPT_META_BYTES = 600


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


class Run:
    """One run of leases of one app: its outcome so far, and its outputs on their way to
    commits (see the module docstring). ``next_claim(committed)`` says what the run's last
    commit claims, given the run's commits before it."""

    def __init__(self, transport: WorkerTransport, committer: Committer, heartbeat: Heartbeat,
                 app: str, runner: AppRunner, ctx: AppContext, *,
                 next_claim: Callable[[int], NextClaim | None] | None = None):
        self.transport, self.committer, self.heartbeat = transport, committer, heartbeat
        self.app, self.runner, self.ctx = app, runner, ctx
        self.next_claim = next_claim
        self.outcome = RunOutcome()
        #: uploaded results not committed yet, and since when
        self.ready: list[Ready] = []
        self.ready_since = 0.0

    # ---- leases and what the app answered ---------------------------------------------------
    def live(self, leases: Sequence[Lease]) -> list[Lease]:
        """``leases`` but those a renewal reported lost (dropped and counted stale)."""
        return [lease for lease in leases if not self._lost(lease)]

    def _lost(self, lease: Lease) -> bool:
        if self.heartbeat.is_lost(lease):
            log.info("dropping %s: its lease was lost", lease.task_id)
            self.heartbeat.drop(lease)
            self.outcome.stale += 1
            return True
        return False

    def take_outputs(self, live: Sequence[Lease], outputs: Sequence[Any], elapsed: float,
                     warm: bool) -> None:
        """A batch's outputs: each result uploaded and held for its commit, each error
        reported; its run time shared out by cost."""
        total_cost = sum(lease.cost for lease in live) or 1.0
        for lease, output in zip(live, outputs):
            if isinstance(output, InvalidOutput):  # the worker's fault: validate rejected it
                log.warning("%s: %s on %s; handing it back", self.app, output, lease.task_id)
                self.fail(lease, "invalid", str(output), batch=len(live))
                continue
            if isinstance(output, BaseException):
                kind = self.runner.classify_error(output)
                log.warning("%s: %s on %s: %s", self.app, kind, lease.task_id, output)
                self.fail(lease, kind, f"{type(output).__name__}: {output}", batch=len(live))
                continue
            self._finish(lease, output, elapsed * lease.cost / total_cost, warm)

    def batch_failed(self, live: Sequence[Lease], exc: Exception) -> None:
        """The app raised for a whole batch: each of its tasks failed."""
        kind = self.runner.classify_error(exc)
        log.warning("%s: %s on %d task(s): %s", self.app, kind, len(live), exc)
        for lease in live:
            self.fail(lease, kind, f"{type(exc).__name__}: {exc}", batch=len(live))

    def abandoned(self, leases: Sequence[Lease]) -> None:
        """Every lease of these running tasks was lost while the app ran: drop them."""
        log.warning("abandoned %d task(s) of %s while running: %s", len(leases), self.app,
                    ", ".join(lease.task_id for lease in leases))
        for lease in leases:
            self.heartbeat.drop(lease)
        self.outcome.abandoned += len(leases)

    def fail(self, lease: Lease, kind: str, message: str, *, batch: int = 1) -> None:
        """Report a failed run of ``lease`` (a lost report leaves it to lease expiry)."""
        self.heartbeat.drop(lease)
        self.outcome.failed += 1
        try:
            self.transport.fail(self.ctx.worker_id, lease, kind, message, batch=batch)
        except StaleResultError as exc:
            log.info("failure report for %s not needed: %s", lease.task_id, exc)
        except redis.RedisError as exc:
            log.warning("could not report failure of %s (%s); lease expiry will requeue it",
                        lease.task_id, exc)

    # ---- a result: upload, hold, commit, settle ---------------------------------------------
    def _finish(self, lease: Lease, output: TaskOutput, run_s: float, warm: bool) -> None:
        """Upload the result (or keep a small one to carry inline) and hold it for the run's
        next commit call."""
        if self._lost(lease):
            return
        inline = b""
        if 0 < len(output.data) <= self.transport.inline_limit:
            inline = bytes(output.data)
            key = result_key(lease.job_id, lease.index, lease.lease_gen, lease.attempt_id,
                             output.extension)
        else:
            key = self._upload(lease, output)
            if key is None:
                return  # reported as failed
        provenance = self._provenance(output)
        if lease.backup and not lease.verify:
            lease = self._free_sample(lease)
        if lease.verify:
            provenance["verify"] = self._verdicts(lease, output)
        if len(self.ready) >= MAX_CLAIM_K:  # a call commits at most that many
            self.flush(last=False)
        if not self.ready:
            self.ready_since = time.perf_counter()
        self.ready.append(Ready(lease, key, run_s, warm, provenance, inline))

    def hold_left(self) -> float | None:
        """Seconds until the held results are due for their commit (None: none held)."""
        if not self.ready:
            return None
        return max(0.0, MAX_HOLD_S - (time.perf_counter() - self.ready_since))

    def flush_if_due(self) -> None:
        """Commit the held results once the first has waited MAX_HOLD_S."""
        if self.ready and time.perf_counter() - self.ready_since >= MAX_HOLD_S:
            self.flush(last=False)

    def flush(self, *, last: bool) -> None:
        """Commit the held results in one call; ``last``: the run's last call, which also
        claims what ``next_claim`` says (with the run's commits so far)."""
        ready, self.ready = self.ready, []
        if not ready:
            return
        plan = (self.next_claim(self.outcome.committed + len(ready) - 1)
                if last and self.next_claim is not None else None)
        commits = (self.committer.many(ready, plan) if len(ready) > 1
                   else [self.committer.one(ready[0], plan)])
        for i, (r, commit) in enumerate(zip(ready, commits, strict=True)):
            self._settle(r, plan if i == len(ready) - 1 else None, commit)
            self.heartbeat.drop(r.lease)

    def _upload(self, lease: Lease, output: TaskOutput) -> str | None:
        """Upload the result under its write-once key; the key, or None after reporting why
        not."""
        key = result_key(lease.job_id, lease.index, lease.lease_gen, lease.attempt_id,
                         output.extension)
        try:
            self.transport.upload(key, output.data, output.content_type,
                                  self._object_meta(lease))
        except ObjectExistsError:
            self.fail(lease, "infra", f"result key {key} is taken by another object")
            return None
        except ResultTooLargeError as exc:  # the gateway's limit: a task error, not the store's
            self.fail(lease, "error", str(exc))
            return None
        except StoreError as exc:
            log.warning("store failed for %s: %s", lease.task_id, exc)
            self.outcome.infra_errors += 1
            self.fail(lease, "infra", f"result store unavailable: {exc}")
            return None
        return key

    def _object_meta(self, lease: Lease) -> dict[str, str]:
        """The stored object's metadata: whose result it is, for audits and retried puts."""
        return {
            "job": lease.job_id, "task": lease.task_id, "lease-gen": str(lease.lease_gen),
            "attempt-id": lease.attempt_id, "app": self.app, "backend": self.ctx.backend,
            "worker": _fit(self.ctx.worker_name, 200), "worker-id": self.ctx.worker_id,
            "prompt": _fit(lease.input, PROMPT_META_BYTES),
        }

    def _free_sample(self, lease: Lease) -> Lease:
        """A backup attempt's lease, with the candidates it verifies when the other attempt's
        maker (not vouched for) committed first and this run became its verification."""
        try:
            found = self.transport.verification(lease)
        except (redis.RedisError, NovaError) as exc:
            log.warning("%s: cannot tell whether this backup verifies a result (%s)",
                        lease.task_id, exc)
            return lease
        if not found:
            return lease
        log.info("%s: this backup run verifies the result the other attempt committed",
                 lease.task_id)
        return dataclasses.replace(lease, verify=found)

    def _verdicts(self, lease: Lease, output: TaskOutput) -> dict[str, str]:
        """A verification run's word on each candidate (``lease.verify``): ``agree`` when the
        app's :meth:`~nova_queue.apps.base.AppSpec.same_result` says this run's result and
        the candidate's are the same, else ``mismatch`` (also when ``same_result`` raises on
        the candidate: a worker may send anything). Nothing about a candidate that
        cannot be read, or of an app whose results do not compare (``comparable`` False):
        the commit then neither credits nor blames its maker, and this run's result stands."""
        spec = self.runner.spec
        verdicts: dict[str, str] = {}
        if not spec.comparable:
            return verdicts
        for slot in lease.verify or {}:
            try:
                theirs = self.transport.candidate(lease, slot)
            except (StoreError, ObjectNotFoundError, redis.RedisError, RuntimeError) as exc:
                log.warning("%s: cannot read the result to verify (%s): %s", lease.task_id,
                            slot, exc)
                continue
            try:
                same = spec.same_result(bytes(output.data), theirs, params=lease.params)
            except Exception as exc:  # noqa: BLE001 - a candidate that cannot be read as a
                # result (a worker may send anything) is not the same result
                log.warning("%s: the result to verify (%s) does not compare: %s",
                            lease.task_id, slot, exc)
                same = False
            verdicts[slot] = "agree" if same else "mismatch"
            log.info("%s: verified %s's result: %s", lease.task_id, slot, verdicts[slot])
        return verdicts

    def _provenance(self, output: TaskOutput) -> dict[str, Any]:
        """The task's ``meta``: the app's metadata plus where and how big the result is."""
        provenance: dict[str, Any] = {k: str(v) for k, v in output.metadata.items()}
        provenance.update(backend=self.ctx.backend, device=self.ctx.device_name,
                          worker=self.ctx.worker_name, content_type=output.content_type,
                          bytes=str(len(output.data)))
        return provenance

    def _settle(self, r: Ready, plan: NextClaim | None, commit: Commit) -> None:
        """Count the commit; keep what it claimed; a stale or refused one discards its
        result (its attempt's own), a refused one fails its task; one in doubt keeps it."""
        if commit.state == "committed":
            self.outcome.committed += 1
            if plan is not None and commit.claimed is not None:
                self.outcome.claimed = (plan.app, commit.claimed)
        elif commit.state in ("stale", "refused"):
            if r.inline:  # refused before its write: nothing of it was kept
                log.warning("%s", commit.error)
            else:
                log.warning("%s; deleting orphan %s", commit.error, r.key)
                try:
                    self.transport.discard(r.key)
                except StoreError as exc:
                    log.warning("could not delete orphan %s: %s", r.key, exc)
            if commit.state == "stale":
                self.outcome.stale += 1
            else:
                self.fail(r.lease, "error", f"its commit was refused: {commit.error}")
        else:
            self.outcome.in_doubt = plan
