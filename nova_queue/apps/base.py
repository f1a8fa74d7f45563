"""The contract between the workload-agnostic runtime and an app."""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from nova_queue.models import TaskSpec


@dataclasses.dataclass(frozen=True)
class AppContext:
    """Where an app runs: the worker's backend and identity."""

    backend: str  # "cuda" | "rocm" | "mps" | "cpu"
    device: str  # torch device string ("cuda:0", "mps", "cpu")
    device_name: str
    worker_id: str
    worker_name: str
    memory_total: int | None = None  # bytes, of the accelerator (or host RAM for cpu)
    memory_free: int | None = None
    #: Simulated slowdown factor (``--slowdown``); apps that can simulate slower hardware honour it.
    slowdown: float = 1.0
    #: Worker options for the app (``--option key=value``), e.g. ``compile=1``.
    options: Mapping[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class TaskInput:
    """One leased task as handed to :meth:`App.run_batch`."""

    task_id: str
    job_id: str
    index: int
    input: str
    cost: float
    params: Mapping[str, Any]  # already parsed by App.parse_params
    attempt: int
    lease_gen: int
    attempt_id: str


@dataclasses.dataclass(frozen=True)
class TaskOutput:
    """A task's result: bytes for the store, plus provenance metadata."""

    data: bytes
    content_type: str
    extension: str  # without the dot: "png"
    metadata: Mapping[str, str] = dataclasses.field(default_factory=dict)


class App(abc.ABC):
    """Base class of every app. One instance lives in one worker process."""

    #: Registry name (``--app NAME``).
    name: ClassVar[str] = ""
    #: One line shown by ``nova-queue apps``.
    description: ClassVar[str] = ""
    #: True if run_batch itself honours ``AppContext.slowdown``; otherwise the worker
    #: simulates slower hardware by waiting (slowdown - 1) x the measured run time.
    handles_slowdown: ClassVar[bool] = False

    def parse_params(self, raw: Mapping[str, str]) -> dict[str, Any]:
        """Validate ``-p key=value`` strings into typed params; raise InputError naming the key."""
        return dict(raw)

    def make_tasks(self, prompts: Sequence[str], params: Mapping[str, Any]) -> list[TaskSpec]:
        """Turn a job's input into tasks with relative costs (default: one task per prompt)."""
        return [TaskSpec(p, 1.0) for p in prompts]

    @abc.abstractmethod
    def setup(self, ctx: AppContext) -> None:
        """Prepare for work on ``ctx``'s backend (called once per worker process)."""

    def prepare(self, params: Mapping[str, Any]) -> bool:
        """Load what ``params`` need (e.g. a model); return True if something was (re)loaded,
        so the worker counts the next run as a cold one."""
        return False

    def batch_size(self, params: Mapping[str, Any]) -> int:
        """How many tasks of a job with ``params`` one :meth:`run_batch` call takes."""
        return 1

    @abc.abstractmethod
    def run_batch(self, tasks: Sequence[TaskInput]) -> list[TaskOutput | BaseException]:
        """Run tasks that share one job's params; one output per task, in order.

        Raising fails every task of the batch. An app that can tell which task failed
        (e.g. one that still runs out of memory after the batch was split) returns that
        task's exception in its place: it is classified and reported, the others commit.
        """

    @abc.abstractmethod
    def benchmark_task(self) -> tuple[str, dict[str, Any]]:
        """A representative (input, parsed params) pair for the startup benchmark."""

    def classify_error(self, exc: BaseException) -> str:
        """``"oom"`` when ``exc`` means the device ran out of memory, else ``"error"``."""
        return "oom" if isinstance(exc, MemoryError) else "error"

    def teardown(self) -> None:
        """Release devices and memory (called once when the worker stops)."""
