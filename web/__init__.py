"""The HTTP layers on Flask: the web gallery and live dashboard (Flask + flask-sock), and the
gateway (:mod:`nova_queue.web.gateway`: the worker protocol over HTTP). They share
``nova_queue.serving``, never each other's modules.

``create_app()`` builds the gallery's app (``gunicorn 'nova_queue.web:create_app()'``
works); ``nova-queue web`` serves it with :func:`serve`. See ``app.py`` for configuration.
The gallery is imported on first use of these names, so importing the gateway does not
load it.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["create_app", "make_web_server", "serve"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("nova_queue.web.app"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
