"""Side by side: a git revision against the working tree, on this machine, runs alternated.

    python benchmarks/ab.py REV [--repeats N]

Checks REV out into a temporary git worktree and alternates REV / working tree N times
(default 3): enqueue of 100k tasks (median of 3 per run), no-op claim → commit
throughput with 1 and 4 processes, and one worker's claim and commit-and-claim round trips
(median µs of 1000 each), each side with its own code (PYTHONPATH) and its own private
redis-server. Prints medians and new ÷ old (for the µs rows lower is better). This is how
the "what moved it" figures in docs/BENCHMARKS.md were measured.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROBE = r'''
import json, sys, time
sys.path.insert(0, "benchmarks")
import benchlib, nova_queue, scale, throughput
from benchlib import median

def latency_us(s, rounds=1000):
    # one worker, as in throughput's loop: a claim, then a commit that claims the next task
    c = throughput._client(s.url, "ab-latency")
    throughput._register(c, "lat")
    c.enqueue(throughput.APP, [nova_queue.TaskSpec(f"l {i}", 1.0) for i in range(3 * rounds)])
    claim, commit_claim = [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        (lease,) = c.claim("lat", throughput.APP, 1).leases
        t1 = time.perf_counter()
        _, nxt = c.complete_and_claim("lat", lease, throughput._key(lease), run_s=0.0, warm=True)
        t2 = time.perf_counter()
        (lease,) = nxt.leases
        c.complete("lat", lease, throughput._key(lease), run_s=0.0, warm=True)
        claim.append((t1 - t0) * 1e6)
        commit_claim.append((t2 - t1) * 1e6)
    c.close()
    return {"claim_us_p50": median(claim), "commit_claim_us_p50": median(commit_claim)}

# revisions before nova_queue/local.py had benchlib.RedisServer().start() and .stop()
s = benchlib.start_redis() if hasattr(benchlib, "start_redis") else benchlib.RedisServer().start()
try:
    out = {"enqueue_100k_s": median([scale.enqueue_once(s, 100_000)["seconds"] for _ in range(3)])}
    for p in (1, 4):
        out[f"tasks_per_s_{p}p"] = throughput.nova_rate(s, p, 4000)["tasks_per_s"]
    out.update(latency_us(s))
finally:
    (s.close if hasattr(s, "close") else s.stop)()
out["nova_queue"] = nova_queue.__file__
print(json.dumps(out))
'''


def probe(tree: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    p = subprocess.run([sys.executable, "-c", PROBE], cwd=tree, env=env, capture_output=True,
                       text=True, timeout=900, check=False)
    if p.returncode:
        sys.exit(f"probe in {tree} failed:\n{p.stderr[-3000:]}")
    out = json.loads(p.stdout.strip().splitlines()[-1])
    if not out.pop("nova_queue").startswith(str(tree)):
        sys.exit(f"probe in {tree} imported another nova_queue")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rev", help="git revision to compare against (e.g. HEAD~3)")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="nova-ab-") as tmp:
        old = Path(tmp) / "old"
        subprocess.run(["git", "worktree", "add", "-q", "--detach", str(old), args.rev],
                       cwd=ROOT, check=True)
        try:
            runs: dict[str, list[dict]] = {"old": [], "new": []}
            for rep in range(args.repeats):
                for side, tree in (("old", old), ("new", ROOT)):
                    runs[side].append(probe(tree))
                    print(f"{rep + 1}/{args.repeats} {side}: {runs[side][-1]}", flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=ROOT,
                           check=False)
    print(f"\n{'measure':22s} {args.rev:>12s} {'working tree':>14s} {'new ÷ old':>10s}")
    for key in runs["old"][0]:
        a = sorted(x[key] for x in runs["old"])[len(runs["old"]) // 2]
        b = sorted(x[key] for x in runs["new"])[len(runs["new"]) // 2]
        print(f"{key:22s} {a:12.3f} {b:14.3f} {b / a:10.2f}")


if __name__ == "__main__":
    main()
