"""Preparation failures: what a worker says when it cannot get ready for a job or an app.

Preparing is everything before a batch runs: importing the app's runtime, finding and
loading the model, initialising the device, room on disk. It fails for the machine, not the
job, so the executor hands the job's leases back without using an attempt (``fail`` kind
``prepare``: the worker is then not offered jobs of that app and model for
``NOVA_CANNOT_RUN_S``), and the startup self-test drops an app whose benchmark fails
(:mod:`~nova_queue.workers.startup`). Either way the message names the fix where it is known.
"""

from __future__ import annotations

from nova_queue.errors import NovaError
from nova_queue.workers.apps import AppRunner

#: What an import error says to do when the runner names no install command of its own.
DEFAULT_INSTALL_HINT = "install the package that provides it next to nova-queue"


def failure_reason(runner: AppRunner, exc: BaseException) -> str:
    """One line for ``exc`` raised while preparing ``runner``'s app: the error (its type
    unless the message speaks for itself), then the fix for a missing module (the runner's
    ``install_hint``, e.g. ``pip install 'nova-queue[txt2img]'``)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if not isinstance(exc, (ImportError, NovaError, OSError)) or not text:
        text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    if isinstance(exc, ImportError):
        hint = getattr(runner, "install_hint", "") or DEFAULT_INSTALL_HINT
        text = f"{text}; to fix: {hint}"
    return text
