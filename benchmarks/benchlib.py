"""Shared benchmark plumbing: a private redis-server, machine facts, medians, progress lines.

The redis-server child, free ports and polling with a deadline come from
``nova_queue.local``, as for the demo and the tests.
"""

from __future__ import annotations

import datetime
import math
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import redis

from nova_queue.errors import ConfigError
from nova_queue.local import RedisServer, find_redis_server

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def start_redis() -> RedisServer:
    """A private redis-server for a run, answering PING (``NOVA_BENCH_REDIS_SERVER`` picks the
    binary; else the newest on PATH). Exits with a message when there is none."""
    try:
        binary = find_redis_server("NOVA_BENCH_REDIS_SERVER")
    except ConfigError as exc:
        sys.exit(str(exc))
    return RedisServer(binary=binary).start()


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (or platform)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info(redis_version: str) -> dict[str, Any]:
    """CPU, cores, RAM, OS, Python, Redis and library versions, and the date."""
    import rq
    from redis.utils import HIREDIS_AVAILABLE

    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        ram = 0
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu_model(), "cores": os.cpu_count(), "ram_gib": round(ram / 2**30, 1),
        "os": f"{platform.system()} {platform.release()}", "python": platform.python_version(),
        "redis": redis_version, "redis_py": redis.__version__, "rq": rq.__version__,
        "hiredis": bool(HIREDIS_AVAILABLE), "load_avg_start": load_avg(),
    }


def load_avg() -> float | None:
    """The 1-minute load average (other work on the machine skews absolute times)."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def redis_cpu_s(client: redis.Redis) -> float:
    """Redis server CPU seconds so far (user + system, main thread and all)."""
    cpu = client.info("cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


def evalsha_stats(client: redis.Redis) -> dict[str, float]:
    """``INFO commandstats`` for EVALSHA (calls, usec) — script time, inner commands included."""
    st = client.info("commandstats")
    ev = st.get("cmdstat_evalsha") or {"calls": 0, "usec": 0}
    return {"calls": int(ev["calls"]), "usec": float(ev["usec"])}


SCRIPT_CMDS = ("cmdstat_evalsha", "cmdstat_eval")
#: the harness's own commands (the CPU and stats reads), left out of the command count
HARNESS_CMDS = ("cmdstat_info", "cmdstat_config")


def script_stats(client: redis.Redis) -> dict[str, Any]:
    """``INFO commandstats``: Lua scripts run (EVALSHA and EVAL; ioredis falls back to EVAL
    when a script is not loaded yet) and Redis time inside them, and every other command
    Redis ran (those the scripts call, which Redis counts too, and plain ones) but INFO and
    CONFIG, the harness's (``by_name``: calls per command)."""
    st = client.info("commandstats")
    rows = [st.get(k) or {"calls": 0, "usec": 0} for k in SCRIPT_CMDS]
    by_name = {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in st.items()
               if k not in SCRIPT_CMDS and not k.split("|")[0].startswith(HARNESS_CMDS)}
    return {"calls": sum(int(x["calls"]) for x in rows),
            "usec": sum(float(x["usec"]) for x in rows), "commands": sum(by_name.values()),
            "by_name": by_name}


def per_task_scripts(scripts: dict[str, Any], tasks: int) -> dict[str, Any]:
    """Lua scripts and commands (the scripts' own included) Redis ran per task, and the time
    inside the scripts per task (``INFO commandstats``, reset at the run's start; its usec is
    a wall clock, so on a loaded machine it can exceed the Redis CPU per task)."""
    return {"scripts_per_task": scripts["calls"] / tasks,
            "redis_script_us_per_task": scripts["usec"] / tasks,
            "redis_commands_per_task": scripts["commands"] / tasks,
            "redis_commands_by_name_per_task": {k: round(v / tasks, 3) for k, v in sorted(
                scripts["by_name"].items(), key=lambda kv: -kv[1])}}


def median(values: list[float]) -> float:
    """The median, ``nan`` for no values."""
    v = sorted(x for x in values if not math.isnan(x))
    if not v:
        return float("nan")
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2


def log(message: str) -> None:
    """Progress line on stderr (the JSON and docs are the results)."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def write_block(folder: Path, name: str, lines: list[str]) -> None:
    """Block ``name`` of ``folder/BENCHMARKS.md`` (docsection.put_block), made of ``lines``."""
    from docsection import put_block

    folder.mkdir(parents=True, exist_ok=True)
    put_block(folder / "BENCHMARKS.md", name, "\n".join(lines))


def section_main(prog: str, doc: str, run_section: Any, write_doc: Any, targets: Any,
                 argv: list[str] | None, *, quick_help: str, repeats_help: str) -> int:
    """The command line of a section run alone (``benchmarks/gateway.py``, ``verify.py``):
    on a private redis-server, ``run_section(server, folder, quick=, repeats=)``; its figures
    as JSON (``--json``), its block of BENCHMARKS.md (``--doc``), or a block rendered from
    an earlier run's JSON (``--from-json``); then its targets, met or MISSED."""
    import argparse
    import json
    import shutil
    import tempfile

    p = argparse.ArgumentParser(prog=prog, description=doc.split("\n")[0])
    p.add_argument("--quick", action="store_true", help=quick_help)
    p.add_argument("--repeats", type=int, metavar="N", help=repeats_help)
    p.add_argument("--json", metavar="OUT", type=Path, help="write the figures as JSON")
    p.add_argument("--doc", metavar="DIR", type=Path, help="write the block of DIR/BENCHMARKS.md")
    p.add_argument("--from-json", metavar="IN", type=Path, help="run nothing: render IN")
    args = p.parse_args(argv)
    if args.from_json:
        figures = json.loads(args.from_json.read_text())
    else:
        folder = Path(tempfile.mkdtemp(prefix="nova-bench-"))
        server = start_redis()
        started = time.time()
        try:
            figures = run_section(server, folder, quick=args.quick, repeats=args.repeats)
        finally:
            server.close()
            shutil.rmtree(folder, ignore_errors=True)
        log(f"{prog}: {time.time() - started:.0f} s")
        if args.json:
            args.json.write_text(json.dumps(figures, indent=1))
    if args.doc:
        write_doc(figures, args.doc)
    for name, measured, met in targets(figures):
        print(f"{'met' if met else 'MISSED':>6}  {name}: {measured}")
    return 0
