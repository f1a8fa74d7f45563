"""The runner half of an app: what runs tasks inside a worker (torch, Pillow, ...)."""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from nova_queue.apps.base import App, AppContext, AppSpec, TaskInput, TaskOutput


class AppRunner(abc.ABC):
    """Base class of an app's runner. The worker makes one per app and process, as
    ``Runner(spec)``, calls :meth:`setup` once, then :meth:`prepare`, :meth:`batch_size`
    and :meth:`run_batch` per group of tasks, and :meth:`teardown` when it stops.

    A one-class :class:`~nova_queue.apps.base.App` has these same methods and counts as an
    ``AppRunner`` (it is registered as a virtual subclass); the worker uses it as is.
    """

    #: True if run_batch itself honours ``AppContext.slowdown``; otherwise the worker
    #: simulates slower hardware by waiting (slowdown - 1) x the measured run time.
    handles_slowdown: ClassVar[bool] = False
    #: The command that installs what the runner imports (e.g. ``pip install
    #: 'nova-queue[txt2img]'``): named when preparing the app fails on a missing module.
    install_hint: ClassVar[str] = ""

    def __init__(self, spec: AppSpec) -> None:
        self.spec = spec

    @property
    def name(self) -> str:
        """The app's registry name (its spec's)."""
        return self.spec.name

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

        Raising fails every task of the batch. A runner that can tell which task failed
        (e.g. one that still runs out of memory after the batch was split) returns that
        task's exception in its place: it is classified and reported, the others commit.
        """

    @abc.abstractmethod
    def benchmark_task(self) -> tuple[str, dict[str, Any]]:
        """A representative (input, parsed params) pair for the startup benchmark."""

    def classify_error(self, exc: BaseException) -> str:
        """``"oom"`` when ``exc`` means the device ran out of memory, else ``"error"``."""
        return "oom" if isinstance(exc, MemoryError) else "error"

    def validate(self, output: TaskOutput) -> None:
        """Raise :class:`~nova_queue.errors.InvalidOutput` (its reason says what is wrong) if
        ``output`` cannot be a right result, whatever the task: an all-black or NaN image, a
        file that is not what it claims to be. The worker calls it on each output before
        anything is uploaded or committed; a rejected output is the worker's fault, not the
        task's (``fail`` kind ``invalid``: no attempt used, the worker offered no more jobs
        of that app and model for a while). Another exception fails the batch, as one
        from :meth:`run_batch` does. Default: every output passes. Keep it cheap."""

    def teardown(self) -> None:
        """Release devices and memory (called once when the worker stops)."""


AppRunner.register(App)
