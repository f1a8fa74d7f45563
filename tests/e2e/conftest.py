"""Fixtures of the end-to-end tests: the tiny random-weight txt2img model (built once per
session; ``nova-queue make-model`` writes the same)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """A tiny random-weight txt2img pipeline folder (needs torch and diffusers)."""
    pytest.importorskip("torch")
    pytest.importorskip("diffusers")
    from nova_queue.workers.apps.txt2img_model import make_model

    return make_model(tmp_path_factory.mktemp("model") / "tiny")
