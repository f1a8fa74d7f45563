"""Apps: what a job's input means and how a worker runs it.

Built-in apps are ``synthetic`` and ``txt2img``; third-party apps register a class in the
``nova_queue.apps`` entry-point group. Importing this package never imports torch.
"""

from __future__ import annotations

from nova_queue.apps.base import App, AppContext, TaskInput, TaskOutput
from nova_queue.apps.registry import available_apps, load_app

__all__ = ["App", "AppContext", "TaskInput", "TaskOutput", "available_apps", "load_app"]
