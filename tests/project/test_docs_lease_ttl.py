"""The configuration reference's lease-TTL rule is the one Settings enforces."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nova_queue.errors import ConfigError
from nova_queue.settings import Settings

CONFIGURATION = (Path(__file__).resolve().parents[2] / "docs" / "CONFIGURATION.md").read_text()


def test_the_docs_state_the_lease_ttl_factor_the_code_enforces():
    row = next(line for line in CONFIGURATION.splitlines() if line.startswith("| `NOVA_LEASE_TTL_S`"))
    factor = int(re.search(r"at least (\d+) × the interval", row).group(1))
    Settings(heartbeat_interval_s=2.0, lease_ttl_s=2.0 * factor)  # exactly the bound: fine
    with pytest.raises(ConfigError, match=f"at least {factor} x"):
        Settings(heartbeat_interval_s=2.0, lease_ttl_s=2.0 * factor - 0.1)
