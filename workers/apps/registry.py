"""How the worker finds an app's runner: the spec's ``runner = "module:Class"``, imported
only here (so the web and the CLI never import torch or Pillow), or, for a one-class
:class:`~nova_queue.apps.base.App`, the spec itself."""

from __future__ import annotations

import dataclasses

from nova_queue.apps.base import App, AppSpec
from nova_queue.apps.registry import import_target, load_app
from nova_queue.errors import AppError
from nova_queue.workers.apps.base import AppRunner


@dataclasses.dataclass(frozen=True)
class WorkerApp:
    """One app in a worker: its spec (params, costs) and its runner (the same object for a
    one-class ``App``)."""

    spec: AppSpec
    runner: AppRunner

    @property
    def name(self) -> str:
        """The app's registry name."""
        return self.spec.name


def runner_for(spec: AppSpec) -> AppRunner:
    """A fresh runner for ``spec``: ``spec`` itself for an ``App``, else its ``runner``
    class made with ``spec``."""
    if isinstance(spec, App):
        return spec  # type: ignore[return-value]  # App is a registered AppRunner
    if not spec.runner:
        raise AppError(f"app {spec.name!r} ({type(spec).__qualname__}) names no runner: set "
                       "its runner = 'module:Class' (an AppRunner subclass)")
    cls = import_target(spec.runner, f"the runner of app {spec.name!r}")
    if not (isinstance(cls, type) and issubclass(cls, AppRunner)):
        raise AppError(f"the runner of app {spec.name!r} ({spec.runner}) is not a "
                       "nova_queue.workers.apps.AppRunner subclass")
    return cls(spec)


def load_worker_app(name: str) -> WorkerApp:
    """The spec registered as ``name`` and a fresh runner for it."""
    spec = load_app(name)
    return WorkerApp(spec, runner_for(spec))
