"""Fixtures of the CLI tests: ``invoke`` runs ``nova-queue ARGS`` in-process (click's
CliRunner); the helpers that check its results are in ``novatests.cli``."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from novatests.cli import nova_env, runner_env

from nova_queue.cli import cli


@pytest.fixture
def invoke(redis_url: str, namespace: str, tmp_path: Path):
    """Run ``nova-queue ARGS`` in-process against this test's Redis namespace and home."""
    runner = CliRunner()
    env = runner_env(nova_env(redis_url, namespace, tmp_path))

    def run(*args: str, input: bytes | str | None = None) -> Result:
        return runner.invoke(cli, list(args), env=env, input=input, catch_exceptions=True)

    return run
