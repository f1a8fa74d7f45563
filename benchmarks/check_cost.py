"""What the protocol check and the retention entry cost per call, in Redis's own time.

    python benchmarks/check_cost.py

Each script runs as it ships and as it would without the change (its source edited at
load), on one private redis-server, in alternating batches; the figure is the median over
the batches of ``INFO commandstats``'s EVALSHA µs per call (the script's own time, the
commands it calls included): ``renew`` of a worker holding nothing and ``claim`` answering
EMPTY, 2,000 calls a batch (the protocol check lives in ``tick``, which both run), and 300
``complete`` calls that each finish a one-task job (``finish_job_with`` enters the job in the
retention index; the enqueues and claims before them are not counted).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from typing import Any

import redis

from nova_queue import NovaClient, TaskSpec
from nova_queue.keys import result_key
from nova_queue.local import RedisServer
from nova_queue.scripts import script_sources


def without_protocol(src: str) -> str:
    """tick without its protocol check (the field read and the call)."""
    out = src.replace("  check_protocol(ctx.meta, protocol)\n", "").replace(
        "'grace_until_ms', 'protocol'))", "'grace_until_ms'))")
    assert out != src
    return out


def without_retention(src: str) -> str:
    """finish_job_with without the retention entry."""
    a = src.index("  local retention_s = int_in(redis.call('HGET', job_key, 'retention_s')")
    return src[:a] + src[src.index("  emit(ctx, 'job_finished'", a):]


def _evalsha(r: redis.Redis) -> tuple[int, float]:
    st = r.info("commandstats").get("cmdstat_evalsha", {"calls": 0, "usec": 0})
    return int(st["calls"]), float(st["usec"])


def compare(r: redis.Redis, src: str, edit: Callable[[str], str], prepare: Callable[[], Any],
            run: Callable[[Any, Any], None], rounds: int) -> dict[str, float]:
    """Median µs per call, as shipped and edited, batches alternated; ``prepare()`` (not
    counted) makes what ``run(script, prepared)`` uses."""
    shipped, edited = r.register_script(src), r.register_script(edit(src))
    got: dict[str, list[float]] = {"with": [], "without": []}
    for _ in range(rounds):
        for label, script in (("with", shipped), ("without", edited)):
            prepared = prepare()
            c0, u0 = _evalsha(r)
            run(script, prepared)
            c1, u1 = _evalsha(r)
            got[label].append((u1 - u0) / (c1 - c0))
    out = {k: round(statistics.median(v), 2) for k, v in got.items()}
    out["cost_us"] = round(out["with"] - out["without"], 2)
    return out


def _leases(c: NovaClient, n: int = 300) -> list[Any]:
    """``n`` one-task jobs, each task claimed by worker w."""
    leases = []
    for _ in range(n):
        c.enqueue("synthetic", [TaskSpec("x")])
        leases += c.claim("w", "synthetic", 1).leases
    return leases


def _commit_all(c: NovaClient, script: Any, leases: list[Any]) -> None:
    for lease in leases:
        keys = [c.keys.task(lease.task_id), c.keys.job(lease.job_id),
                *c.worker.commit_keys("w", "synthetic")]
        key = result_key(lease.job_id, lease.index, lease.lease_gen, lease.attempt_id, "png")
        reply = script(keys=keys, args=c.worker.commit_args("w", lease, key, 0.01, True, None))
        assert reply[0] == 0 and reply[1] == 1, reply  # committed, and finished its job


def main() -> None:
    """Print the three comparisons as JSON."""
    server = RedisServer().start()
    try:
        # a long TTL: the worker stays registered through every batch (claims reap the lost)
        c = NovaClient.from_url(server.url, namespace="cost", lease_ttl_s=3600.0,
                                heartbeat_interval_s=60)
        c.register_worker("w", {"name": "w"}, ["synthetic"])
        k, src = c.keys, script_sources()
        renew = ([k.worker("w"), k.leases(), k.alive(), k.inflight(), k.failed(),
                  k.finished(), k.meta(), k.events()],
                 [c.prefix, "w", c.settings.lease_ttl_ms, 5_000, 1000, 100])
        claim = (c.worker.claim_keys("w", "synthetic"),
                 [c.prefix, "w", 1000, *c.worker.claim_args("synthetic", 1, ["a1"]).argv()])

        def calls(keys_args: tuple[list[str], list[Any]]) -> Callable[[Any, Any], None]:
            return lambda s, _: [s(keys=keys_args[0], args=keys_args[1]) for _ in range(2000)]

        out = {
            "renew": compare(c.redis, src["renew"][1], without_protocol, lambda: None,
                             calls(renew), 12),
            "claim_empty": compare(c.redis, src["claim"][1], without_protocol, lambda: None,
                                   calls(claim), 12),
            "complete_finishing_a_job": compare(
                c.redis, src["complete"][1], without_retention, lambda: _leases(c),
                lambda s, leases: _commit_all(c, s, leases), 8),
        }
        print(json.dumps(out, indent=1))
    finally:
        server.close()


if __name__ == "__main__":
    main()
