"""Where txt2img may load a model from. A job's ``model`` param is untrusted input: it may
name a Hugging Face hub id (``org/name``) or a pipeline folder under the worker's model
roots, which are the folders in ``NOVA_MODEL_ROOTS`` plus the folder the operator gave the
worker with ``-o model=DIR`` (an operator's path is trusted). Any other path gets one error,
the same whether it is missing, outside the roots or not a pipeline, so a job cannot probe
the worker's filesystem through the error stored on its task. No torch, no diffusers."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterable
from pathlib import Path

from nova_queue.errors import ModelNotFoundError

#: A Hugging Face repo id as the hub accepts it: ``org/name``, no ``..`` or ``--``.
HUB_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}\Z")


@dataclasses.dataclass(frozen=True)
class ModelSource:
    """What ``from_pretrained`` gets: a resolved local folder, or a hub id."""

    source: str
    local: bool


def is_hub_id(model: str) -> bool:
    """True for ``org/name`` hub ids; such a name is never read as a local path."""
    return (bool(HUB_ID_RE.match(model)) and ".." not in model and "--" not in model
            and not model.endswith(".git"))


def model_roots(roots_setting: str, operator_model: str | None = None) -> tuple[Path, ...]:
    """The resolved folders a job's model may come from: ``roots_setting`` (``os.pathsep``
    separated, as ``NOVA_MODEL_ROOTS``) and the operator's ``-o model=DIR`` if it is a path."""
    folders: list[str] = [p for p in roots_setting.split(os.pathsep) if p.strip()]
    if operator_model and not is_hub_id(operator_model):
        folders.append(operator_model)
    return tuple(dict.fromkeys(_resolve(Path(f.strip())) for f in folders))


def resolve_model(model: str, roots: Iterable[Path]) -> ModelSource:
    """The source to load ``model`` from, or ModelNotFoundError (one message for every path
    that may not be loaded)."""
    if is_hub_id(model):
        return ModelSource(model, local=False)
    folder = _resolve(Path(model).expanduser())
    if any(folder == root or root in folder.parents for root in roots) \
            and (folder / "model_index.json").is_file():
        return ModelSource(str(folder), local=True)
    raise unavailable(model)


def unavailable(model: str) -> ModelNotFoundError:
    """The one error for a model path this worker will not load."""
    shown = model if len(model) <= 200 else model[:197] + "..."
    # the fix first: the worker's cannot_run mark keeps the first 200 bytes of it
    return ModelNotFoundError(
        f"txt2img model {shown!r} is not available on this worker; to fix: start the worker "
        "with -o model=DIR (the pipeline folder) or add a folder above it to NOVA_MODEL_ROOTS. "
        "A job may name a pipeline folder under those model roots or a Hugging Face hub id "
        "(org/name); `nova-queue make-model DIR` writes a tiny test model, and HF_HOME may "
        "point at a Hugging Face cache that holds the hub id."
    )


def _resolve(path: Path) -> Path:
    """``path`` made absolute with symlinks followed (a link out of a root is outside it)."""
    try:
        return path.expanduser().resolve()
    except (OSError, RuntimeError):  # a symlink loop, an unreadable parent
        return Path(os.path.abspath(path))
