"""Scenario 9: workers whose clocks are hours off (libfaketime, Debian package ``faketime``).
Leases use Redis ``TIME`` inside the scripts, so a skewed worker clock changes nothing:
no lease expires early or late, and both workers share the job.

Only the wall clock is skewed (``FAKETIME_DONT_FAKE_MONOTONIC=1``), as on a machine whose
NTP is off. libfaketime's default also shifts CLOCK_MONOTONIC, which real machines never
do; Python's timed waits (``threading.Event.wait``) then never wake up (the kernel waits
on the real clock), so the heartbeat thread would hang in any program, nova-queue or not."""

from __future__ import annotations

import datetime
import re
import time
from pathlib import Path

import pytest
from novatests.chaos.fleet import stop_cleanly
from novatests.chaos.history import check, invariants

from nova_queue import TaskSpec
from nova_queue.local import wait_for
from nova_queue.stores import open_store

pytestmark = pytest.mark.slow

LIBFAKETIME = next((p for p in ("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
                                "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
                                "/usr/lib/faketime/libfaketime.so.1") if Path(p).exists()), None)
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)", re.MULTILINE)


#: Leases of 20 s (the fleet's are 2 s): a skew of hours would still end every lease at once,
#: while a heartbeat starved on a busy machine (CI shares it) does not end one by itself.
STEADY_LEASES = {"NOVA_LEASE_TTL_S": "20", "NOVA_HEARTBEAT_INTERVAL_S": "2"}


def _faked(offset: str) -> dict[str, str]:
    return {"LD_PRELOAD": LIBFAKETIME, "FAKETIME": offset, "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            **STEADY_LEASES}


def _skew_h(log: str) -> float:
    """Hours between the worker's first log timestamp (its local clock) and now."""
    stamp = datetime.datetime.strptime(_STAMP.search(log).group(1), "%Y-%m-%d %H:%M:%S")
    return (stamp - datetime.datetime.now()).total_seconds() / 3600


@pytest.mark.skipif(LIBFAKETIME is None, reason="libfaketime missing: apt-get install faketime")
def test_workers_with_skewed_clocks_keep_their_leases(fleet, nova_chaos, record):
    started = time.monotonic()
    nova = nova_chaos
    ahead = fleet.start("ahead", "--no-benchmark", env=_faked("+2h"))
    behind = fleet.start("behind", "--no-benchmark", env=_faked("-3h"))
    wait_for(lambda: len([w for w in nova.workers() if w.alive]) == 2, timeout_s=60,
             message="both workers to join")  # so that both share the job
    job = nova.enqueue("synthetic", [TaskSpec(f"clock {i}", 0.3) for i in range(12)],
                       params={"seconds": 0.3, "size": 64})
    wait_for(lambda: nova.job(job, with_tasks=False).finished, timeout_s=90,
             message=f"job to finish\n{fleet.logs()}")
    stop_cleanly([ahead, behind])
    # the fake clocks really applied (the log's timestamps come from the worker's clock)
    assert 1.9 < _skew_h(ahead.output()) < 2.1 and -3.1 < _skew_h(behind.output()) < -2.9
    verdict = check(nova, [job], store=open_store(fleet.store_url), expect="done")
    assert not invariants(nova, [job])
    record(9, verdict, started)
    st = nova.job(job)
    assert {t.worker_name for t in st.tasks} == {"ahead", "behind"}
    assert verdict.requeued == 0 and verdict.rejected == 0  # nothing expired, nothing fenced
    now_ms = nova.server_time_ms()
    for t in st.tasks:  # every lease was stamped by Redis's clock, not the worker's
        assert now_ms - 120_000 < t.claimed_ms <= t.finished_ms <= now_ms
        assert abs(t.finished_ms - t.claimed_ms) < 20_000 + 60_000
