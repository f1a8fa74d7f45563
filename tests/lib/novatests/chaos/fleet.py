"""Shared pieces of the chaos suite: lease settings, a NovaClient factory, worker fleets."""

from __future__ import annotations

import re
import signal
from collections.abc import Iterable
from pathlib import Path

from nova_queue import NovaClient
from novatests.procs import WorkerProc

#: Leases fail over within seconds; the event stream keeps every event of a run.
LEASE_TTL_S = 2.0
HEARTBEAT_S = 0.5
EVENTS_MAXLEN = 10_000_000
CHAOS_ENV = {"NOVA_LEASE_TTL_S": str(LEASE_TTL_S), "NOVA_HEARTBEAT_INTERVAL_S": str(HEARTBEAT_S),
             "NOVA_EVENTS_MAXLEN": str(EVENTS_MAXLEN), "NOVA_MAX_ATTEMPTS": "3"}


def chaos_client(url: str, namespace: str, **settings) -> NovaClient:
    """A NovaClient with the chaos lease settings and an untrimmed event stream."""
    opts = {"lease_ttl_s": LEASE_TTL_S, "heartbeat_interval_s": HEARTBEAT_S,
            "events_maxlen": EVENTS_MAXLEN}
    opts.update(settings)
    return NovaClient.from_url(url, namespace=namespace, **opts)


class Fleet:
    """Starts worker processes; every one is killed at teardown."""

    def __init__(self, redis_url: str, namespace: str, store_url: str, root: Path):
        self.redis_url, self.namespace, self.store_url, self.root = (
            redis_url, namespace, store_url, root)
        self.procs: list[WorkerProc] = []

    def start(self, name: str, *args: str, env: dict[str, str] | None = None,
              redis_url: str | None = None) -> WorkerProc:
        """A ``nova-queue worker --app synthetic`` process with chaos settings."""
        proc = WorkerProc(redis_url or self.redis_url, self.namespace, self.store_url,
                          self.root / name, "--app", "synthetic", *args,
                          env={**CHAOS_ENV, **(env or {})}, name=name)
        self.procs.append(proc)
        return proc

    def logs(self) -> str:
        """Every worker's log, for assertion messages."""
        return logs(self.procs)

    def close(self) -> None:
        for p in self.procs:
            p.close()


def logs(procs: Iterable[WorkerProc]) -> str:
    """These workers' logs (the last 3000 characters of each), for assertion messages."""
    return "\n".join(f"===== {p.log_path.parent.name}\n{p.output()[-3000:]}" for p in procs)


def stop_cleanly(procs: Iterable[WorkerProc]) -> None:
    """SIGTERM each worker; each must exit 0 within 30 s and log no traceback."""
    procs = list(procs)
    for p in procs:
        p.signal(signal.SIGTERM)
    assert [p.wait(30) for p in procs] == [0] * len(procs), logs(procs)
    no_tracebacks(procs)


_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (\w+) ")


def no_tracebacks(procs) -> None:
    """Assert that no worker crashed or logged an error with a traceback. DEBUG records are
    skipped: botocore logs the tracebacks of the requests it retries at DEBUG."""
    for p in procs:
        out = p.output()
        assert "Exception in thread" not in out, out[-4000:]
        level = ""
        kept = []
        for line in out.splitlines():
            m = _RECORD.match(line)
            level = m.group(1) if m else level
            if level != "DEBUG":
                kept.append(line)
        text = "\n".join(kept)
        assert "Traceback" not in text, text[-4000:]
