"""Post-processing of finished jobs: artifacts (manifest, contact sheet, zip), then an
optional webhook, run as RQ jobs by ``nova-queue post-worker``.

The flow, and why no finished job is lost:

1. The Lua scripts that finish a job in state ``done`` add it to the namespace's
   ``finished`` outbox (``nova:{ns}:finished``) and write a ``job_finished`` event to its
   stream, in the same atomic step. Workers do nothing more: they never touch RQ.
2. The post-worker (:mod:`~nova_queue.post.worker`) is the only RQ producer. It follows the
   event stream (``XREAD BLOCK``) and dispatches each finished job at once
   (:func:`~nova_queue.post.queue.dispatch`), and it sweeps the whole outbox every few
   seconds, which covers jobs finished while no post-worker ran and any dispatch that failed.
   A dispatch is an RQ job with a deterministic id, enqueued with RQ's ``unique=True``: while
   that RQ job exists (queued, running, or failed and kept for a while), a second dispatch
   is a no-op, so several post-workers may follow the same namespace.
3. The RQ job (:func:`~nova_queue.post.jobs.build_job`) builds the artifacts
   (:mod:`~nova_queue.post.artifacts`), queues the webhook as a separate RQ job with
   ``Retry``, and only then removes the outbox entry, if its score (the finish time) is
   unchanged.

This package is one layer, the post-processing runtime, on top of the core: it may import
the core, RQ and Pillow, never the worker runtime, the web or the CLI, and nothing below it
imports it (``tests/project/test_layering.py``). Where artifacts live in the store
(:class:`~nova_queue.stores.ArtifactKeys`, :func:`~nova_queue.stores.artifact_names`) is
the core's, so the web and the CLI read them without this package.

Modules: :mod:`~nova_queue.post.queue` (queue names, job ids, dispatch; RQ),
:mod:`~nova_queue.post.jobs` (the RQ job functions), :mod:`~nova_queue.post.artifacts`
(building them; Pillow), :mod:`~nova_queue.post.worker` (the post-worker). Importing this
package imports neither RQ nor Pillow.
"""

from __future__ import annotations

import importlib
from typing import Any

from nova_queue.stores import ArtifactKeys, artifact_names

__all__ = ["ArtifactKeys", "artifact_names"]


def __getattr__(name: str) -> Any:
    # RQ jobs queued before post-processing became a package name their functions
    # nova_queue.post.build_job / webhook_job; RQ resolves those names when it runs them.
    if name in ("build_job", "webhook_job"):
        return getattr(importlib.import_module("nova_queue.post.jobs"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
