"""The synthetic app's runner: burns a known amount of CPU per task, then draws its card.

Each task hashes (SHA-256, chained over the prompt) until ``seconds × slowdown`` of wall
time has passed, then renders a PNG card (:mod:`nova_queue.workers.apps.card`) with the
prompt, backend, worker, job and task. Params and costs are in the spec,
:mod:`nova_queue.apps.synthetic`.

Gray failures, for tests, chaos runs and benchmarks: ``-o control=PATH`` names a JSON file
the runner reads before each task (when it changed), so a test can turn a healthy worker
into a broken one mid-job: ``{"slowdown": 100}`` (times ``--slowdown``: thermal
throttling), ``{"fail": "all"}`` or ``{"fail": "every_other"}`` (a broken driver, a flaky
one), ``{"hang": "soft"}`` (never returns, but can be interrupted), ``{"hang": "hard",
"hang_s": 30}`` (blocks the worker's interrupt signal, as native code would, for
``hang_s`` seconds, then returns its result late). ``"times": N`` limits the failure to the
first N tasks that start under these settings (``{"hang": "hard", "hang_s": 6, "times": 1}``:
one late result, then healthy), so a test need not race the worker to switch it back.
``{"prepare": "fail"}`` makes preparing a job fail (a missing runtime or model, no disk):
the worker hands the job back without using an attempt, and its startup self-test fails.
``{"invalid": "all"}`` makes each task return an all-black PNG (a broken driver's output),
which :meth:`SyntheticRunner.validate` rejects: the worker hands it back (the worker's
fault, no attempt used). ``{"lie": 0.3}`` makes a share of tasks (drawn per task and
attempt, seeded: the same task lies the same way) return a well-formed card with a wrong
answer, which only re-running the task elsewhere shows (docs/SECURITY.md, verification);
``"honest_first": 50`` keeps the first 50 tasks under these settings honest.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import random
import signal
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from nova_queue.apps.base import AppContext, AppSpec, TaskInput, TaskOutput
from nova_queue.apps.image_checks import image_problem
from nova_queue.apps.synthetic import DEFAULTS, jittered_seconds, task_answer
from nova_queue.errors import AppError, ConfigError, InvalidOutput
from nova_queue.workers.apps.base import AppRunner
from nova_queue.workers.apps.card import black_png, metadata_safe, render_card

log = logging.getLogger(__name__)

_HASHES_PER_CHECK = 256  # SHA-256 rounds between clock reads (~0.1 ms)


class PoisonTaskError(RuntimeError):
    """Raised on purpose by a task whose prompt matches ``crash_on`` (a simulated app bug)."""


class SimulatedFailure(RuntimeError):
    """Raised on purpose by a worker whose control file says ``fail`` (a broken device)."""


class SimulatedPrepareError(RuntimeError):
    """Raised on purpose when preparing a job on a worker whose control file says
    ``prepare: fail`` (as a missing runtime, model or disk would)."""


class Control:
    """The ``-o control=PATH`` file: gray failures switched on while the worker runs."""

    def __init__(self, path: str):
        self.path = path
        self._mtime: float | None = None
        self.state: dict[str, Any] = {}
        self.tasks = 0
        #: tasks started under the current settings (``times`` counts against it)
        self.under_state = 0
        #: task slots (``--concurrency``) start tasks at once: one reads and counts at a time
        self._lock = threading.Lock()

    def read(self) -> dict[str, Any]:
        """The file's settings (re-read when it changed; {} while it is missing)."""
        try:
            mtime = os.stat(self.path).st_mtime
        except OSError:
            self.state, self._mtime = {}, None
            return self.state
        if mtime != self._mtime:
            try:
                with open(self.path, encoding="utf-8") as f:
                    state = json.load(f)
                self.state = state if isinstance(state, dict) else {}
            except (OSError, ValueError):
                return self.state  # being written: keep the last settings
            self._mtime = mtime
            self.under_state = 0
        return self.state

    def before_prepare(self) -> None:
        """Fail the preparation of a job while the file says ``{"prepare": "fail"}``."""
        with self._lock:
            state = self.read()
        if state.get("prepare") == "fail":
            raise SimulatedPrepareError("simulated: this worker cannot prepare synthetic jobs "
                                        "(its control file says prepare: fail)")

    def invalid_output(self) -> bool:
        """Whether the task that just started (:meth:`before_task`) returns an all-black
        PNG: the file says ``{"invalid": "all"}`` (within its ``times``)."""
        with self._lock:
            state, under_state = self.state, self.under_state
        times = state.get("times")
        return state.get("invalid") == "all" and not (isinstance(times, int)
                                                      and under_state > times)

    def lies(self, task: TaskInput) -> bool:
        """Whether the task that just started (:meth:`before_task`) returns a wrong answer:
        the file's ``lie`` share, past its ``honest_first`` tasks."""
        with self._lock:
            state, under_state = self.state, self.under_state
        share, honest = state.get("lie"), state.get("honest_first", 0)
        if not isinstance(share, (int, float)) or share <= 0:
            return False
        if isinstance(honest, int) and under_state <= honest:
            return False
        return random.Random(f"{task.task_id}:{task.attempt}").random() < share

    def before_task(self) -> float:
        """Apply the failure of the moment; returns the extra slowdown factor."""
        with self._lock:
            state = self.read()
            self.tasks += 1
            self.under_state += 1
            tasks, under_state = self.tasks, self.under_state
        times = state.get("times")
        if isinstance(times, int) and under_state > times:
            return 1.0  # the failure was for the first `times` tasks only
        fail = state.get("fail")
        if fail == "all" or (fail == "every_other" and tasks % 2 == 0):
            raise SimulatedFailure(f"simulated broken device ({fail})")
        if state.get("hang") in ("soft", "hard"):
            log.info("control file: hanging (%s)", state["hang"])
        if state.get("hang") == "soft":
            while True:  # never returns; the worker's interrupt (SIGUSR1) ends it
                time.sleep(3600)
        if state.get("hang") == "hard":
            hard_hang(float(state.get("hang_s", 1e9)))
        factor = state.get("slowdown", 1.0)
        return float(factor) if isinstance(factor, (int, float)) and factor > 0 else 1.0


def hard_hang(seconds: float) -> None:
    """Stay deaf to the worker's interrupt for ``seconds``, as native code would."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


class SyntheticRunner(AppRunner):
    """Runs synthetic tasks: calibrated CPU work, then a PNG card."""

    handles_slowdown = True

    def __init__(self, spec: AppSpec) -> None:
        super().__init__(spec)
        self._ctx: AppContext | None = None
        self._control: Control | None = None

    def setup(self, ctx: AppContext) -> None:
        """Remember the context; nothing to load."""
        if not (math.isfinite(ctx.slowdown) and ctx.slowdown > 0):
            raise ConfigError(f"slowdown must be a positive number, got {ctx.slowdown!r}")
        self._ctx = ctx
        control = ctx.options.get("control")
        self._control = Control(control) if control else None

    def prepare(self, params: Mapping[str, Any]) -> bool:
        """Nothing to load (the control file may make it fail)."""
        if self._control is not None:
            self._control.before_prepare()
        return False

    def batch_size(self, params: Mapping[str, Any]) -> int:
        """One task per batch."""
        return 1

    def run_batch(self, tasks: Sequence[TaskInput]) -> list[TaskOutput]:
        """Work for ``seconds × slowdown`` per task, then draw its card."""
        if self._ctx is None:
            raise AppError("synthetic: setup() was not called")
        return [self._run_one(self._ctx, task) for task in tasks]

    def benchmark_task(self) -> tuple[str, dict[str, Any]]:
        """A 0.05 reference-second task (cost 0.05 on the same scale as real tasks)."""
        return "benchmark", self.spec.parse_params({"seconds": "0.05"})

    def classify_error(self, exc: BaseException) -> str:
        """MemoryError (including ``oom_on``) is ``"oom"``."""
        return "oom" if isinstance(exc, MemoryError) else "error"

    def validate(self, output: TaskOutput) -> None:
        """InvalidOutput unless the card is a PNG that is neither all black nor one colour
        (:func:`~nova_queue.apps.image_checks.image_problem`)."""
        problem = image_problem(output.data)
        if problem:
            raise InvalidOutput(problem)

    def _run_one(self, ctx: AppContext, task: TaskInput) -> TaskOutput:
        params = task.params
        crash_on, oom_on = params.get("crash_on") or "", params.get("oom_on") or ""
        if crash_on and crash_on in task.input:
            raise PoisonTaskError(f"poison task: prompt contains {crash_on!r} (crash_on)")
        if oom_on and oom_on in task.input:
            raise MemoryError(f"simulated out-of-memory: prompt contains {oom_on!r} (oom_on)")
        seconds = jittered_seconds(float(params.get("seconds", DEFAULTS["seconds"])),
                                   float(params.get("jitter", 0.0)),
                                   int(params.get("jitter_seed", 0)), task.index)
        extra = self._control.before_task() if self._control is not None else 1.0
        lie = self._control is not None and self._control.lies(task)
        started = time.perf_counter()
        digest, rounds = burn(task.input, seconds * ctx.slowdown * extra)
        compute_s = time.perf_counter() - started
        meta = {
            "app": self.name, "prompt": metadata_safe(task.input), "backend": ctx.backend,
            "device": ctx.device, "worker": ctx.worker_name, "worker_id": ctx.worker_id,
            "job": task.job_id, "task": task.task_id, "index": str(task.index),
            "attempt": str(task.attempt), "seconds": f"{seconds:g}",
            "slowdown": f"{ctx.slowdown:g}", "compute_s": f"{compute_s:.4f}",
            "hash_rounds": str(rounds), "digest": digest,
            "answer": task_answer(f"forged {task.input}" if lie else task.input),
        }
        size = int(params.get("size", DEFAULTS["size"]))
        if self._control is not None and self._control.invalid_output():
            return TaskOutput(black_png(size), "image/png", "png", meta)
        png = render_card(task.input, meta, size)
        return TaskOutput(data=png, content_type="image/png", extension="png", metadata=meta)


def burn(text: str, duration_s: float) -> tuple[str, int]:
    """Chain SHA-256 over ``text`` until ``duration_s`` has passed; return (hex digest, rounds)."""
    h = hashlib.sha256(text.encode("utf-8", "replace")).digest()
    deadline = time.perf_counter() + max(0.0, duration_s)
    rounds = 0
    while time.perf_counter() < deadline:
        for _ in range(_HASHES_PER_CHECK):
            h = hashlib.sha256(h).digest()
        rounds += _HASHES_PER_CHECK
    return h.hex(), rounds
