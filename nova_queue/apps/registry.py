"""Finds apps by name: built-ins, then the ``nova_queue.apps`` entry-point group.

An entry point names an :class:`~nova_queue.apps.base.AppSpec` subclass (its ``runner``
says where the worker finds the other half) or an :class:`~nova_queue.apps.base.App`
subclass (spec and runner in one class). Loading a spec never imports its runner.
"""

from __future__ import annotations

import importlib
import logging
from importlib.metadata import entry_points

from nova_queue.apps.base import AppSpec
from nova_queue.errors import AppError

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "nova_queue.apps"
BUILTIN = {
    "synthetic": "nova_queue.apps.synthetic:SyntheticSpec",
    "txt2img": "nova_queue.apps.txt2img:Txt2ImgSpec",
}


def _targets() -> dict[str, str]:
    targets = dict(BUILTIN)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        targets.setdefault(ep.name, ep.value)
    return targets


def available_apps() -> list[str]:
    """Names of every app that can be loaded."""
    return sorted(_targets())


def import_target(target: str, what: str) -> object:
    """The object ``"module:attr"`` names; AppError (saying it is ``what``) if it cannot be
    imported."""
    module_name, _, attr = target.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise AppError(f"{what} could not be loaded from {target}: {exc}") from exc


def load_app(name: str) -> AppSpec:
    """A fresh instance of the app spec registered as ``name`` (an ``App`` is a spec too)."""
    target = _targets().get(name)
    if target is None:
        raise AppError(f"unknown app {name!r}; available: {', '.join(available_apps())}")
    cls = import_target(target, f"app {name!r}")
    if not (isinstance(cls, type) and issubclass(cls, AppSpec)):
        raise AppError(f"app {name!r} ({target}) is not a nova_queue.apps.AppSpec subclass")
    return cls()
