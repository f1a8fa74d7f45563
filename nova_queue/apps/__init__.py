"""Apps: what a job's input means (the spec, here) and how a worker runs it (the runner, in
:mod:`nova_queue.workers.apps`).

Built-in apps are ``synthetic`` and ``txt2img``; third-party apps register a spec class (or
a one-class :class:`App`) in the ``nova_queue.apps`` entry-point group. Importing this
package imports neither torch nor Pillow.
"""

from __future__ import annotations

from nova_queue.apps.base import App, AppContext, AppSpec, TaskInput, TaskOutput
from nova_queue.apps.registry import available_apps, load_app

__all__ = ["App", "AppContext", "AppSpec", "TaskInput", "TaskOutput", "available_apps",
           "load_app"]
