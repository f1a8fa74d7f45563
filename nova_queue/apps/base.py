"""The contract between the workload-agnostic runtime and an app.

An app has two halves. Its :class:`AppSpec` (here, in the core) says what a job's params
and prompts mean; the web gallery, the CLI and the worker use it. Its runner (an
``AppRunner`` in :mod:`nova_queue.workers.apps`) runs tasks inside a worker, with torch or
Pillow as it needs. The dataclasses a runner receives and returns (:class:`AppContext`,
:class:`TaskInput`, :class:`TaskOutput`) are plain data and live here. :class:`App` is the
older one-class form, still supported.
"""

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
    """One leased task as handed to a runner's ``run_batch``."""

    task_id: str
    job_id: str
    index: int
    input: str
    cost: float
    params: Mapping[str, Any]  # already parsed by the spec's parse_params
    #: which attempt this is, 1 for the first (the task's ``attempt_count`` once claimed)
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


class AppSpec:
    """The job-description half of an app: what a job's params and prompts mean.

    The web gallery, the CLI and the worker use it; it never imports torch or Pillow (a
    method that needs Pillow, as txt2img's :meth:`same_result`, imports it when called).
    The worker runs the app with the :class:`~nova_queue.workers.apps.AppRunner` subclass
    that :attr:`runner` names, imported only there.

    Results from machines the operator does not control can be checked by running a task
    again elsewhere: :meth:`same_result` says whether two results of one task agree
    (default: identical bytes, so an app gets verification without code; an app whose
    backends round differently compares what matters, as txt2img does perceptually). An
    app whose results cannot be compared at all (a sampled text, a timestamped report)
    sets :attr:`comparable` to False: its results from untrusted workers are then only
    validated on the worker (``AppRunner.validate``), never checked against a re-run.
    """

    #: Registry name (``--app NAME``).
    name: ClassVar[str] = ""
    #: One line saying what the app does.
    description: ClassVar[str] = ""
    #: The worker half, ``"module:Class"`` (an ``AppRunner`` subclass), resolved lazily by the
    #: worker. Empty for an :class:`App`, which is its own runner.
    runner: ClassVar[str] = ""
    #: True if the runner may run several batches at once in one process (thread-safe, or
    #: waiting on I/O): ``nova-queue worker --concurrency N`` gives it N task slots. False
    #: (the default) keeps one: a GPU app batches its tasks instead.
    concurrent: ClassVar[bool] = False
    #: The nova-queue extra its runner needs on a worker ('': none), and whether that
    #: includes torch (a joining machine then runs ``nova-queue setup-torch`` first, so the
    #: extra does not pull a build that does not fit it): what ``tokens create --gateway``
    #: prints for a token of this app.
    worker_extra: ClassVar[str] = ""
    needs_torch: ClassVar[bool] = False
    #: False if two results of one task cannot be compared (:meth:`same_result` means
    #: nothing): untrusted workers' results of the app are then only validated.
    comparable: ClassVar[bool] = True

    def parse_params(self, raw: Mapping[str, str]) -> dict[str, Any]:
        """Validate ``-p key=value`` strings into typed params; raise InputError naming the key."""
        return dict(raw)

    def make_tasks(self, prompts: Sequence[str], params: Mapping[str, Any]) -> list[TaskSpec]:
        """Turn a job's input into tasks with relative costs (default: one task per prompt)."""
        return [TaskSpec(p, 1.0) for p in prompts]

    def model_key(self, params: Mapping[str, Any]) -> str:
        """What a worker must have loaded (warm) to run a job with ``params`` without a load
        first, as the runner's ``warm_key`` names it (e.g. txt2img: its model); '' when
        nothing is loaded per job (the default)."""
        return ""

    def same_result(self, a: bytes, b: bytes, *, params: Mapping[str, Any] | None = None
                    ) -> bool:
        """Whether ``a`` and ``b``, two results of one task (of a job with ``params``), agree
        (default: identical bytes). Called only when :attr:`comparable` is True."""
        return a == b


class App(AppSpec, abc.ABC):
    """An app written as one class, spec and runner together (the interface before the
    split, still supported): the web and the CLI use it as its :class:`AppSpec`, the worker
    uses the same instance as its runner. The runner methods below follow the contract of
    :class:`nova_queue.workers.apps.AppRunner`. New apps subclass ``AppSpec`` and
    ``AppRunner`` instead, so that the web and the CLI never import what the runner needs.
    """

    #: True if run_batch itself honours ``AppContext.slowdown``; otherwise the worker
    #: simulates slower hardware by waiting (slowdown - 1) x the measured run time.
    handles_slowdown: ClassVar[bool] = False

    @abc.abstractmethod
    def setup(self, ctx: AppContext) -> None:
        """Prepare for work on ``ctx``'s backend (called once per worker process)."""

    def prepare(self, params: Mapping[str, Any]) -> bool:
        """Load what ``params`` need; True if something was (re)loaded."""
        return False

    def batch_size(self, params: Mapping[str, Any]) -> int:
        """How many tasks of a job with ``params`` one :meth:`run_batch` call takes."""
        return 1

    @abc.abstractmethod
    def run_batch(self, tasks: Sequence[TaskInput]) -> list[TaskOutput | BaseException]:
        """Run tasks that share one job's params; one output (or exception) per task."""

    @abc.abstractmethod
    def benchmark_task(self) -> tuple[str, dict[str, Any]]:
        """A representative (input, parsed params) pair for the startup benchmark."""

    def classify_error(self, exc: BaseException) -> str:
        """``"oom"`` when ``exc`` means the device ran out of memory, else ``"error"``."""
        return "oom" if isinstance(exc, MemoryError) else "error"

    def validate(self, output: TaskOutput) -> None:
        """Raise :class:`~nova_queue.errors.InvalidOutput` if ``output`` is wrong on its face
        (default: every output passes); see ``AppRunner.validate``."""

    def teardown(self) -> None:
        """Release devices and memory (called once when the worker stops)."""
