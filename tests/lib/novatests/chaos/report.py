"""Collects chaos verdicts and renders docs/RELIABILITY.md.

``tests/chaos/conftest.py`` fills one :class:`Report` per session and writes it when
``NOVA_CHAOS_REPORT`` names a file; ``python tests/chaos/report.py`` runs the chaos suite
that way to regenerate the document.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import platform
import subprocess

from nova_queue.local import find_redis_server

SCENARIOS = {
    1: "kill -9 of workers at random moments, repeatedly, during a job",
    2: "two workers race to commit one task (old lease vs new lease)",
    3: "a worker frozen (SIGSTOP) past its TTL, then resumed",
    4: "forged completions and failures (wrong worker, lease_gen, attempt_id, unknown task)",
    5: "a poison task that crashes every time",
    6: "thousands of concurrent claims from many processes and threads",
    7: "Redis kill -9 mid-job with AOF, restarted (short outage and one longer than the TTL)",
    8: "a local Redis Cluster (three masters) runs a job end to end",
    9: "workers whose clocks are 2 h ahead and 3 h behind (libfaketime)",
    10: "the S3 result store stopped mid-job, then restarted",
    11: "commit and claim replies lost (connection cut after the script ran)",
    12: "SCRIPT FLUSH mid-run; Redis at maxmemory (noeviction)",
    13: "Hypothesis fuzzing of prompt files, params and the web API (runs: examples; tasks: "
        "jobs the fuzzed web form enqueued; only InputError / 4xx, never a crash or a 500)",
    14: "a worker whose every task fails at once (a broken device) beside a healthy one",
    15: "a task that never returns while its worker's heartbeat lives (a hang)",
    16: "a worker that turns 100x slower mid-job (throttling)",
    17: "a fast worker that joins after a slow one took a long task (late joiner)",
    18: "a flaky worker that fails every other task",
    19: "a poison task (fails everywhere) with two healthy workers",
    20: "a hung task whose worker returns its result late (stale)",
    21: "an app stuck in native code after its task was abandoned (exit 75 for a restart)",
    22: "a worker restarted with other labels between claims (a job requires the old ones)",
    23: "an owner's share changes in the middle of a job (fair share)",
    24: "gateway mode: worker kill -9 mid-task, replacements join",
    25: "gateway mode: a worker frozen (SIGSTOP) past its TTL, then resumed",
    26: "gateway mode: the gateway killed (-9) mid-job and restarted",
    27: "gateway mode: two gateways serve one pool, one killed for good",
    28: "gateway mode: a worker's token revoked mid-job",
    29: "gateway mode: a forged completion and failure for another worker's lease",
    30: "gateway mode: an upload to another attempt's result key",
    31: "a phantom gateway worker declares a benchmark of 1e-9 s and never claims",
    32: "a gateway token fails every task and says hello again (a new worker id) after each",
    33: "a gateway worker hands every task back as an infra failure (no attempt used)",
    34: "a worker that cannot prepare a job (no runtime, model or disk), alone, then a "
        "capable one joins",
    35: "a worker that cannot prepare a job, looking 50x faster, beside a capable one",
    36: "a worker that is not trusted turns liar after 15 tasks, beside a trusted one; "
        "jobs run until it is caught (verification)",
    37: "a worker that is not trusted is honest: its results are verified and stand",
}


@dataclasses.dataclass
class Row:
    """One scenario's totals over every run recorded in the session."""

    runs: int = 0
    tasks: int = 0
    claims: int = 0
    lost: int = 0
    double: int = 0
    stale_accepted: int = 0
    overlap: int = 0
    rejected: int = 0
    requeued: int = 0
    backups: int = 0
    forged: int = 0
    seconds: float = 0.0


class Report:
    """Session-wide collector: ``report.add(scenario, verdict, seconds)``; ``gaps`` maps the
    node id of each strict-xfail test that ran to its reason (conftest fills it)."""

    def __init__(self) -> None:
        self.rows: dict[int, Row] = {}
        self.gaps: dict[str, str] = {}

    def add(self, scenario: int, verdict, seconds: float = 0.0, runs: int = 1) -> None:
        """Add one run's verdict (a ``novatests.chaos.history.Verdict``) to ``scenario``'s
        row."""
        row = self.rows.setdefault(scenario, Row())
        row.runs += runs
        row.seconds += seconds
        for name in ("tasks", "claims", "lost", "double", "stale_accepted", "overlap", "rejected",
                     "requeued", "backups", "forged"):
            setattr(row, name, getattr(row, name) + getattr(verdict, name))

    def render(self) -> str:
        """The Markdown document."""
        return render(self.rows, self.gaps)


def _redis_version() -> str:
    try:
        out = subprocess.run([find_redis_server("NOVA_TEST_REDIS_SERVER"), "--version"],
                             capture_output=True, text=True, timeout=10, check=False).stdout
        return out.split()[2] if out else "?"
    except Exception:  # noqa: BLE001 - informational only
        return "?"


def render(rows: dict[int, Row], gaps: dict[str, str] | None = None) -> str:
    """Markdown: what was checked, then one table row per scenario."""
    return "\n".join([*_intro(), *_table_rows(rows), *_footer(gaps)])


def _intro() -> list[str]:
    """What the checker counts, how this run was made, and the table's header."""
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return [
        "# Reliability",
        "",
        "nova-queue promises at-least-once execution, exactly one committed result per task,",
        "no stale commit ever accepted, and no task lost while Redis keeps its data. The chaos",
        "suite in `tests/chaos/` checks that promise under faults with real processes, a real",
        "Redis and a real S3 server (SeaweedFS). Every run records its history (the namespace's",
        "event stream, `NOVA_EVENTS_MAXLEN` raised so nothing is trimmed, plus the commits the",
        "test clients saw accepted) and a checker (`tests/lib/novatests/chaos/history.py`)",
        "replays it:",
        "",
        "- **lost**: a task that did not end done/failed as expected, or a done task whose",
        "  result object is missing from the store;",
        "- **double**: a task with more than one accepted commit;",
        "- **stale accepted**: a commit accepted although it did not hold the task's live",
        "  lease (or a commit a client saw accepted that is not the task's committed lease);",
        "- **two live leases**: a task claimed while another lease on it was live, or with a",
        "  `lease_gen` that did not increase; a backup attempt is the one allowed exception: it",
        "  starts beside exactly one other worker's live attempt (`backup_started`), and the",
        "  first of the two to commit ends the other (`backup_won` / `backup_lost`), or one",
        "  ends alone (`attempt_ended`: timed out, lost) and the other runs on;",
        "- **forged**: a done task whose result came from a worker caught returning a wrong",
        "  result (a verification `mismatch`, docs/SECURITY.md), committed before it was caught",
        "  and not verified since: verification must re-run every such result. A result held",
        "  for verification ends its attempt (`verifying`), the re-run that checks it is an",
        "  attempt of its own (`verify_started`), and the result that stands after an",
        "  agreement is the held one's.",
        "",
        "*claims*, *stale rejected*, *requeued* and *backups* show that the faults really",
        "happened (leases granted, fenced reports turned away, leases given back, backup",
        "attempts started). The five checked columns must be zero.",
        "",
        (f"Generated by `python tests/chaos/report.py` on {when}: Python "
         f"{platform.python_version()}, redis-server {_redis_version()}, "
         f"{os.cpu_count()} CPU cores."),
        "",
        ("| # | scenario | runs | tasks | claims | lost | double | stale accepted "
         "| two live leases | forged | stale rejected | requeued | backups | time (s) |"),
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]


def _table_rows(rows: dict[int, Row]) -> list[str]:
    """One row per scenario, in the order of SCENARIOS."""
    lines: list[str] = []
    for number, title in SCENARIOS.items():
        r = rows.get(number)
        if r is None:
            lines.append(f"| {number} | {title} | not run | | | | | | | | | | | |")
            continue
        if number == 13:  # no queue history: the fuzz checks errors and responses
            lines.append(f"| {number} | {title} | {r.runs} | {r.tasks} | – | – | – | – | – | – "
                         f"| – | – | – | {r.seconds:.1f} |")
            continue
        lines.append(f"| {number} | {title} | {r.runs} | {r.tasks} | {r.claims} | {r.lost} | "
                     f"{r.double} | "
                     f"{r.stale_accepted} | {r.overlap} | {r.forged} | {r.rejected} | "
                     f"{r.requeued} | "
                     f"{r.backups} | {r.seconds:.1f} |")
    return lines


def _footer(gaps: dict[str, str] | None) -> list[str]:
    """How to run it, the known gaps (strict xfails), where the security checks are."""
    lines = [
        "",
        "Run it with `python -m pytest tests/chaos` (about 3 minutes on 2 cores; every",
        "scenario with real processes is marked `slow`). Scenario 1 picks a random kill",
        "schedule and names its seed when it fails; `NOVA_CHAOS_SEED=<seed>` replays it.",
        "",
        "## Known gaps",
        "",
        "Each is a strict `xfail` test that fails today for the reason given and will report",
        "XPASS (failing the suite) once fixed; none is counted in the table.",
        "",
    ]
    for nodeid, reason in sorted((gaps or {}).items()):
        lines.append(f"- `{nodeid}`: {reason.removeprefix('reason: ')}")
    if not gaps:
        lines.append("- none")
    lines += [
        "",
        "Security checks (Redis ACL roles, TLS, credentials in logs) are in",
        "`tests/chaos/test_security_*.py`; see [SECURITY.md](SECURITY.md). What verification",
        "of untrusted workers' results guarantees (the *forged* column: once a liar is caught,",
        "none of its unverified results stands) and what it costs and does not guarantee:",
        "[SECURITY.md](SECURITY.md#verification-results-from-machines-you-do-not-control);",
        "its benchmark: [BENCHMARKS.md](BENCHMARKS.md#verification-of-untrusted-workers).",
        "",
    ]
    return lines
