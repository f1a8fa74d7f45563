"""Gateway mode against direct mode, side by side on one machine: the per-task overhead with
no-op tasks, the throughput lost with 0.1 s tasks (target: ≤ 10 %), and recovery after a
gateway worker's ``kill -9``. ``benchmarks/run.py --only gateway`` runs it with the others;
alone, on a private redis-server, it writes its JSON and its block of BENCHMARKS.md:

    python benchmarks/gateway.py --quick --json /tmp/gw.json --doc docs

Each measurement starts one real worker (``--no-benchmark``) in a fresh namespace: direct
(Redis and the file store) or through a real ``nova-queue gateway`` process with a token.
Once it joined, N tasks are enqueued; the time is from the enqueue to the job's last commit
(Redis time, from the event stream). Direct and gateway runs alternate in every repeat.
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path
from typing import Any

import requests
from benchlib import load_avg, log, median, section_main, write_block
from fleet import Proc, _env, start_nova_worker, stop_all

from nova_queue import NovaClient, TaskSpec, tokens
from nova_queue.local import RedisServer, free_port, wait_for

NA = "n/a"


def start_gateway(server: RedisServer, ns: str, store: str, folder: Path, *,
                  lease_ttl_s: float = 10.0, heartbeat_s: float = 2.0) -> tuple[Proc, str]:
    """A ``nova-queue gateway`` process on a free port; returns it and its URL once it
    answers."""
    port = free_port()
    argv = [sys.executable, "-m", "nova_queue", "--redis", server.url, "--namespace", ns,
            "--store", store, "--log-level", "warning", "gateway", "--bind", f"127.0.0.1:{port}"]
    proc = Proc(f"gw-{ns}", argv, _env(NOVA_LEASE_TTL_S=f"{lease_ttl_s:g}",
                                       NOVA_HEARTBEAT_INTERVAL_S=f"{heartbeat_s:g}"),
                folder / f"gw-{ns}.log")
    url = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        try:
            return requests.post(url + "/v1/hello", timeout=2).status_code == 401
        except requests.RequestException:
            return False

    wait_for(answers, 60, 0.05, "the gateway to answer")
    return proc, url


def start_gateway_worker(url: str, token: str, folder: Path, name: str,
                         extra: tuple[str, ...] = ()) -> Proc:
    """``nova-queue worker --gateway URL`` with only its token (no Redis, no store), and
    ``extra`` arguments."""
    home = folder / f"home-{name}"
    home.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "nova_queue", "--log-level", "info", "worker", "--gateway",
            url, "--app", "synthetic", "--name", name, "--no-benchmark", *extra]
    return Proc(name, argv, _env(NOVA_HOME=str(home), NOVA_WORKER_TOKEN=token),
                folder / f"{name}.log")


def _pool(server: RedisServer, folder: Path, mode: str, names: tuple[str, ...], *,
          lease_ttl_s: float = 10.0, heartbeat_s: float = 2.0
          ) -> tuple[NovaClient, list[Proc], list[Proc]]:
    """A namespace with workers ``names`` (direct or through one gateway), all joined."""
    ns = f"gw-{mode}-{uuid.uuid4().hex[:6]}"
    store = f"file://{folder}/store-{ns}"
    client = NovaClient.from_url(server.url, namespace=ns, lease_ttl_s=lease_ttl_s,
                                 heartbeat_interval_s=heartbeat_s)
    gateways, workers = [], []
    if mode == "gateway":
        gw, url = start_gateway(server, ns, store, folder, lease_ttl_s=lease_ttl_s,
                                heartbeat_s=heartbeat_s)
        gateways.append(gw)
        workers = [start_gateway_worker(url, tokens.create(client, n), folder / ns, n)
                   for n in names]
    else:
        workers = [start_nova_worker(server.url, ns, store, folder / ns, n, 1.0,
                                     lease_ttl_s=lease_ttl_s, heartbeat_s=heartbeat_s,
                                     extra=("--no-benchmark",)) for n in names]
    wait_for(lambda: sum(e.type == "worker_joined" for e in client.events(count=1000))
             >= len(names), 120, 0.05, f"{mode} workers to join")
    return client, gateways, workers


def timed_job(server: RedisServer, folder: Path, mode: str, n: int, seconds: float
              ) -> dict[str, float]:
    """One worker runs ``n`` tasks of ``seconds``; seconds per task and tasks per second."""
    client, gateways, workers = _pool(server, folder, mode, ("bench",))
    try:
        t0 = client.server_time_ms()
        job = client.enqueue("synthetic", [TaskSpec(f"t{i}", max(seconds, 0.001))
                                           for i in range(n)],
                             params={"seconds": seconds, "size": 64})
        wait_for(lambda: client.job(job, with_tasks=False).finished, 600, 0.02, "the job")
        last = max(e.ts_ms for e in client.events(count=100_000) if e.type == "completed")
    finally:
        stop_all(workers + gateways)
        client.close()
    wall_s = (last - t0) / 1000
    return {"wall_s": wall_s, "per_task_ms": 1000 * wall_s / n, "tasks_per_s": n / wall_s}


def recover_once(server: RedisServer, folder: Path, lease_ttl_s: float) -> float:
    """Two gateway workers, one long task; its holder killed (-9): seconds until claimed
    again."""
    client, gateways, workers = _pool(server, folder, "gateway", ("a", "b"),
                                      lease_ttl_s=lease_ttl_s, heartbeat_s=lease_ttl_s / 5)
    try:
        client.enqueue("synthetic", [TaskSpec("hold", 1.0)], params={"seconds": 600})
        claim = wait_for(lambda: [e for e in client.events(count=1000) if e.type == "claimed"],
                         60, 0.05, "the lease")[0]
        holder = next(w for w in workers
                      if any(x.worker_id == claim.fields["worker"] and x.name == w.name
                             for x in client.workers()))
        killed_at = holder.kill9()
        again = wait_for(lambda: [e for e in client.events(claim.id, count=1000)
                                  if e.type == "claimed"], lease_ttl_s * 3 + 30, 0.05,
                         "the task claimed again")[0]
    finally:
        stop_all(workers + gateways)
        client.close()
    return again.ts_ms / 1000 - killed_at


def run_section(server: RedisServer, folder: Path, *, quick: bool, repeats: int | None = None
                ) -> dict[str, Any]:
    """Direct and gateway runs interleaved, ``repeats`` times; then the recovery runs."""
    repeats = repeats or (1 if quick else 3)
    n_noop, n_short = (40, 20) if quick else (200, 60)
    load_start = load_avg()
    runs: dict[str, list[dict[str, float]]] = {k: [] for k in
                                               ("noop_direct", "noop_gateway", "short_direct",
                                                "short_gateway")}
    for rep in range(repeats):
        for mode in ("direct", "gateway"):
            runs[f"noop_{mode}"].append(timed_job(server, folder, mode, n_noop, 0.0))
            runs[f"short_{mode}"].append(timed_job(server, folder, mode, n_short, 0.1))
        log(f"gateway: repeat {rep + 1}/{repeats} done")
    ttl = 3.0
    recoveries = [recover_once(server, folder, ttl) for _ in range(repeats)]
    med = {k: median([r["per_task_ms"] for r in v]) for k, v in runs.items()}
    rate = {k: median([r["tasks_per_s"] for r in v]) for k, v in runs.items()}
    return {"repeats": repeats, "n_noop": n_noop, "n_short": n_short, "runs": runs,
            "noop_direct_ms": med["noop_direct"], "noop_gateway_ms": med["noop_gateway"],
            "overhead_ms": med["noop_gateway"] - med["noop_direct"],
            "short_direct_per_s": rate["short_direct"],
            "short_gateway_per_s": rate["short_gateway"],
            "short_loss_pct": 100 * (1 - rate["short_gateway"] / rate["short_direct"]),
            "recovery_ttl_s": ttl, "recovery_s": recoveries,
            "max_recovery_s": max(recoveries), "load_avg": [load_start, load_avg()],
            "cores": os.cpu_count()}


def targets(g: dict[str, Any] | None) -> list[tuple[str, Any, Any]]:
    """The gateway's targets: (name, measured, met)."""
    if not g:
        return [("gateway: a 0.1 s task loses ≤ 10 % of throughput", NA, None),
                ("gateway: recovery after a worker's kill -9 ≤ TTL + 1 s", NA, None)]
    return [("gateway: a 0.1 s task loses ≤ 10 % of throughput",
             f"{g['short_loss_pct']:.1f} % (overhead {g['overhead_ms']:.1f} ms per no-op task)",
             g["short_loss_pct"] <= 10),
            ("gateway: recovery after a worker's kill -9 ≤ TTL + 1 s",
             f"{g['max_recovery_s']:.2f} s @ {g['recovery_ttl_s']:g} s",
             g["max_recovery_s"] <= g["recovery_ttl_s"] + 1)]


def section(g: dict[str, Any], table: Any) -> list[str]:
    """The BENCHMARKS.md section (``table``: report's Markdown table builder)."""
    intro = (f"One real worker per run, direct (Redis and the file store) or through a real "
             f"`nova-queue gateway` with a token, runs N synthetic tasks; direct and gateway "
             f"runs alternate, {g['repeats']} repeat(s); medians. Time: the enqueue to the "
             f"last commit. Recovery: two gateway workers, one long task, its holder "
             f"`kill -9`ed; the task's next `claimed` event − the kill (TTL "
             f"{g['recovery_ttl_s']:g} s).")
    if g.get("load_avg"):
        intro += (f" The machine's 1-minute load average was {g['load_avg'][0]} at the start "
                  f"and {g['load_avg'][1]} at the end, on {g.get('cores')} cores: the gateway "
                  "and the worker are Python processes competing for them, so the absolute "
                  "times are noisy.")
    rows = [["no-op tasks", str(g["n_noop"]), f"{g['noop_direct_ms']:.1f} ms / task",
             f"{g['noop_gateway_ms']:.1f} ms / task", f"+{g['overhead_ms']:.1f} ms per task"],
            ["0.1 s tasks", str(g["n_short"]), f"{g['short_direct_per_s']:.2f} tasks/s",
             f"{g['short_gateway_per_s']:.2f} tasks/s", f"{g['short_loss_pct']:.1f} % lost"]]
    out = ["## 7. Gateway mode", "", intro, ""]
    out += table(["tasks", "N", "direct", "gateway", "difference"], rows)
    per_run = {k: "/".join(f"{r['per_task_ms']:.0f}" for r in v) for k, v in g["runs"].items()}
    out += [(f"Each repeat, ms per task: no-op {per_run['noop_direct']} direct, "
            f"{per_run['noop_gateway']} gateway; 0.1 s tasks {per_run['short_direct']} direct, "
            f"{per_run['short_gateway']} gateway."), "",
            ("Where the time goes: the file store's fsyncs and the commit script are the same "
            "in both modes; the gateway adds one HTTP request per task (the result travels "
            "with its commit as one raw body), served by Python on both sides (waitress, "
            "the connection kept alive), and one Redis round trip before the commit (one "
            "script: the token, its rate window, the lease holder). "
            "`benchmarks/gateway_profile.py` times the pieces of one commit. On a machine "
            "whose cores are busy, each hop (worker, gateway, Redis) waits for a core."), "",
            "Recovery after a gateway worker's kill -9: "
            + ", ".join(f"{s:.2f} s" for s in g["recovery_s"]) + ".", ""]
    return out


def write_doc(g: dict[str, Any], folder: Path) -> None:
    """The gateway's block of ``folder/BENCHMARKS.md``."""
    import report

    write_block(folder, "gateway", section(g, report._table))


def main(argv: list[str] | None = None) -> int:
    """Run the section alone (a private redis-server); its JSON and doc block if asked."""
    return section_main("benchmarks/gateway.py", __doc__, run_section, write_doc, targets, argv,
                        quick_help="fewer tasks, one repeat",
                        repeats_help="repeats [default: 1 quick, else 3]")


if __name__ == "__main__":
    sys.exit(main())
