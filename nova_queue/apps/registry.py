"""Finds apps: built-ins, then the ``nova_queue.apps`` entry-point group."""

from __future__ import annotations

import importlib
import logging
from importlib.metadata import entry_points

from nova_queue.apps.base import App
from nova_queue.errors import AppError

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "nova_queue.apps"
BUILTIN = {
    "synthetic": "nova_queue.apps.synthetic:SyntheticApp",
    "txt2img": "nova_queue.apps.txt2img:Txt2ImgApp",
}


def _targets() -> dict[str, str]:
    targets = dict(BUILTIN)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        targets.setdefault(ep.name, ep.value)
    return targets


def available_apps() -> list[str]:
    """Names of every app that can be loaded."""
    return sorted(_targets())


def load_app(name: str) -> App:
    """A fresh instance of the app registered as ``name``."""
    target = _targets().get(name)
    if target is None:
        raise AppError(f"unknown app {name!r}; available: {', '.join(available_apps())}")
    module_name, _, attr = target.partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise AppError(f"app {name!r} could not be loaded from {target}: {exc}") from exc
    if not (isinstance(cls, type) and issubclass(cls, App)):
        raise AppError(f"app {name!r} ({target}) is not an nova_queue.apps.App subclass")
    return cls()
