"""App runners: the worker half of each app (``setup`` ... ``teardown``), with torch or
Pillow inside. Built-ins: :mod:`~nova_queue.workers.apps.synthetic` (with its card,
:mod:`~nova_queue.workers.apps.card`) and :mod:`~nova_queue.workers.apps.txt2img`. A spec
(:class:`nova_queue.apps.AppSpec`) names its runner as ``runner = "module:Class"``; the
worker imports it with :func:`load_worker_app`. Importing this package imports neither torch
nor Pillow."""

from __future__ import annotations

from nova_queue.workers.apps.base import AppRunner
from nova_queue.workers.apps.registry import WorkerApp, load_worker_app, runner_for

__all__ = ["AppRunner", "WorkerApp", "load_worker_app", "runner_for"]
