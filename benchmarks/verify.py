"""Verification of results from workers that are not trusted (docs/SECURITY.md): what it
catches and what it costs, with real processes. ``benchmarks/run.py --only verify`` runs it
with the others; alone, on a private redis-server, it writes its JSON and its block of
BENCHMARKS.md:

    python benchmarks/verify.py --quick --json /tmp/verify.json --doc docs

Each case is a fresh namespace: two trusted direct ``nova-queue worker`` processes (they
verify) and two gateway workers through a real ``nova-queue gateway``, each with a token
made ``--trust new`` (as every token is by default). In the liar cases one gateway worker's
control file makes it return a well-formed card with a wrong answer on a share of its tasks
(10 %, 30 %, 100 %, and 30 % after 50 honest tasks); jobs of synthetic tasks run one after
another until it is caught (at most ``MAX_JOBS``), then every job is waited for (a caught
liar's unverified results run again, in finished jobs too) and each final card's answer is
checked against the task's own. Measured:

- ``wrong_results_accepted``: final results with a wrong answer, over every case;
- ``detected_after_tasks``: the results the 30 % liar committed before its first
  ``mismatch`` (median over the repeats);
- ``honest_overhead_fraction``: both gateway workers honest; verification runs ÷ tasks in
  the second half of the run (after warm-up; the tasks cost the same, so that is extra
  task-seconds ÷ useful task-seconds).

An all-trusted pool takes none of these paths: its makespan is the scheduling section's.
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from benchlib import load_avg, log, median, section_main, write_block
from fleet import start_nova_worker, stop_all
from gateway import start_gateway, start_gateway_worker

from nova_queue import NovaClient, TaskSpec, tokens
from nova_queue.apps.image_checks import png_text
from nova_queue.apps.synthetic import task_answer
from nova_queue.keys import ident_of
from nova_queue.local import RedisServer, wait_for
from nova_queue.results import Results
from nova_queue.stores import open_store

NA = "n/a"
#: Seconds of work per task (synthetic), tasks per job, most jobs per liar case.
SECONDS, JOB_TASKS, MAX_JOBS = 0.02, 50, 30
#: The liar cases: name -> its control file.
LIARS = {"10 %": {"lie": 0.1}, "30 %": {"lie": 0.3}, "100 %": {"lie": 1.0},
         "30 % after 50 honest": {"lie": 0.3, "honest_first": 50}}


class Pool:
    """Two trusted direct workers and two gateway workers of new tokens, in a namespace of
    their own; ``liar``: the control file of the first gateway worker, if any."""

    def __init__(self, server: RedisServer, folder: Path, liar: dict[str, Any] | None):
        self.ns = f"verify-{uuid.uuid4().hex[:8]}"
        self.folder = folder / self.ns
        self.folder.mkdir(parents=True)
        self.store_url = (self.folder / "store").resolve().as_uri()
        self.client = NovaClient.from_url(server.url, namespace=self.ns)
        gw, url = start_gateway(server, self.ns, self.store_url, self.folder)
        self.procs = [gw]
        for i in range(2):
            self.procs.append(start_nova_worker(
                server.url, self.ns, self.store_url, self.folder, f"trusted{i}", 1.0,
                lease_ttl_s=10.0, heartbeat_s=2.0, extra=("--no-benchmark",)))
        for i in range(2):
            extra: tuple[str, ...] = ()
            if liar is not None and i == 0:
                control = self.folder / "liar.json"
                control.write_text(json.dumps(liar))
                extra = ("-o", f"control={control}")
            name = "liar" if extra else f"gateway{i}"
            self.procs.append(start_gateway_worker(
                url, tokens.create(self.client, name, trust="new"), self.folder, name, extra))
        wait_for(lambda: len(self.client.eligible_workers("synthetic")) == 4, 180, 0.1,
                 "four workers to join")

    def job(self, n: int, tag: str) -> str:
        """One job of ``n`` tasks; returns when it finished."""
        job = self.client.enqueue("synthetic", [TaskSpec(f"{tag} {i}", SECONDS) for i in range(n)],
                                  params={"seconds": SECONDS, "size": 64})
        wait_for(lambda: self.client.job(job, with_tasks=False).finished, 600, 0.05, "a job")
        return job

    def wrong(self, jobs: list[str]) -> int:
        """Final results of ``jobs`` whose card does not carry its task's answer."""
        results = Results(self.client.redis, self.client.keys, open_store(self.store_url))
        bad = 0
        for job in jobs:
            for t in self.client.job(job).tasks:
                answer = png_text(results.get(t.result).data).get("answer")
                bad += answer != task_answer(t.input)
        return bad

    def close(self) -> None:
        stop_all(self.procs)
        self.client.close()


def liar_case(server: RedisServer, folder: Path, control: dict[str, Any]) -> dict[str, Any]:
    """Jobs until the liar is caught; then the wrong results left and when it was caught."""
    pool = Pool(server, folder, control)
    try:
        jobs: list[str] = []
        caught = None
        while len(jobs) < MAX_JOBS and caught is None:
            jobs.append(pool.job(JOB_TASKS, f"j{len(jobs)}"))
            caught = next((e for e in pool.client.events(count=1_000_000)
                           if e.type == "mismatch"), None)
        wait_for(lambda: all(pool.client.job(j, with_tasks=False).finished for j in jobs),
                 600, 0.1, "every job, re-runs included")
        events = pool.client.events(count=1_000_000)
        liar = {w.identity for w in pool.client.workers() if w.name == "liar"}
        before = [e for e in events if e.type in ("completed", "verifying")
                  and ident_of(e.fields.get("worker", "")) in liar
                  and (caught is None or (e.ts_ms, e.id) < (caught.ts_ms, caught.id))]
        return {"jobs": len(jobs), "tasks": len(jobs) * JOB_TASKS, "caught": caught is not None,
                "committed_before_caught": len({(e.fields["job"], e.fields["task"])
                                                for e in before}),
                "reopened": sum(e.type == "invalidated" for e in events),
                "verify_runs": sum(_rerun(e) for e in events),
                "wrong": pool.wrong(jobs)}
    finally:
        pool.close()


def _rerun(e) -> bool:
    """A verification that ran the task again (not a backup that was running already)."""
    return e.type == "verify_started" and e.fields.get("free") != "1"


def honest_case(server: RedisServer, folder: Path, n_jobs: int) -> dict[str, Any]:
    """Both gateway workers honest: verification runs per task, by halves of the run."""
    pool = Pool(server, folder, None)
    try:
        jobs = [pool.job(JOB_TASKS, f"h{i}") for i in range(n_jobs)]
        events = pool.client.events(count=1_000_000)
        half = set(jobs[len(jobs) // 2:])
        late = [e for e in events if _rerun(e) and e.fields["job"] in half]
        early = [e for e in events if _rerun(e) and e.fields["job"] not in half]
        untrusted = sum(1 for j in half for t in pool.client.job(j).tasks
                        if t.worker_name.startswith("gateway"))
        return {"tasks": len(jobs) * JOB_TASKS, "verify_runs_first_half": len(early),
                "verify_runs_second_half": len(late), "second_half_tasks": len(half) * JOB_TASKS,
                "second_half_untrusted_results": untrusted,
                "overhead_fraction": len(late) / (len(half) * JOB_TASKS),
                "wrong": pool.wrong(jobs)}
    finally:
        pool.close()


def run_section(server: RedisServer, folder: Path, *, quick: bool, repeats: int | None = None
                ) -> dict[str, Any]:
    """Every liar case (the 30 % one ``repeats`` times), then the honest pool."""
    repeats = repeats or (2 if quick else 5)
    started_load = load_avg()
    cases: dict[str, list[dict[str, Any]]] = {}
    for name, control in LIARS.items():
        for _ in range(repeats if name == "30 %" else 1):
            cases.setdefault(name, []).append(liar_case(server, folder, control))
            log(f"verify: liar {name}: {cases[name][-1]}")
    honest = honest_case(server, folder, 4 if quick else 8)
    log(f"verify: honest pool: {honest}")
    thirty = [c["committed_before_caught"] for c in cases["30 %"] if c["caught"]]
    return {"cases": cases, "honest": honest, "repeats": repeats,
            "wrong_results_accepted": sum(c["wrong"] for runs in cases.values() for c in runs)
            + honest["wrong"],
            "detected_after_tasks": median(thirty) if thirty else None,
            "uncaught": sum(not c["caught"] for runs in cases.values() for c in runs),
            "honest_overhead_fraction": honest["overhead_fraction"],
            "seconds": SECONDS, "job_tasks": JOB_TASKS, "max_jobs": MAX_JOBS,
            "load_avg": [started_load, load_avg()]}


def targets(v: dict[str, Any] | None) -> list[tuple[str, Any, Any]]:
    """Verification's targets: (name, measured, met)."""
    names = ("verify: wrong results accepted = 0 (every case)",
             "verify: a 30 % liar is caught after ≤ 20 of its results (median)",
             "verify: honest untrusted half of the pool costs ≤ 10 % extra task-seconds")
    if not v:
        return [(n, NA, None) for n in names]
    after = v["detected_after_tasks"]
    return [(names[0], f"{v['wrong_results_accepted']} ({v['uncaught']} case(s) not caught)",
             v["wrong_results_accepted"] == 0),
            (names[1], NA if after is None else f"{after:g}", after is not None and after <= 20),
            (names[2], f"{v['honest_overhead_fraction']:.3f}",
             v["honest_overhead_fraction"] <= 0.10)]


def section(v: dict[str, Any], table: Any) -> list[str]:
    """The BENCHMARKS.md section (``table``: report's Markdown table builder)."""
    rows = []
    for name, runs in v["cases"].items():
        for c in runs:
            rows.append([name, str(c["jobs"]), str(c["tasks"]), "yes" if c["caught"] else "no",
                         str(c["committed_before_caught"]), str(c["reopened"]),
                         str(c["verify_runs"]), str(c["wrong"])])
    h = v["honest"]
    intro = (f"Two trusted direct workers and two gateway workers of new tokens (real "
             f"processes, one real gateway; every worker verifies, the gateway workers each "
             f"other's results after the trusted ones' 2 s head start) per case; verification "
             f"runs count re-runs, not backups that became checks; synthetic tasks of "
             f"{v['seconds']:g} s in jobs of {v['job_tasks']}, run one after another until the "
             f"liar's first mismatch (at most {v['max_jobs']} jobs), then every job waited for "
             "and each final card's answer checked against its task's.")
    if v.get("load_avg"):
        intro += (f" Load average {v['load_avg'][0]} at the start, {v['load_avg'][1]} at "
                  "the end.")
    met = "; ".join(f"{name.removeprefix('verify: ')}: {measured} "
                    f"({'met' if ok else 'missed'})" for name, measured, ok in targets(v))
    out = ["## Verification of untrusted workers", "", intro, "", f"Targets: {met}.", ""]
    out += table(["liar", "jobs", "tasks", "caught", "its results before", "re-run",
                  "verification runs", "wrong results left"], rows)
    out += [(f"Both gateway workers honest ({h['tasks']} tasks): "
             f"{h['verify_runs_first_half']} verification runs in the first half, "
             f"{h['verify_runs_second_half']} in the second ({h['second_half_tasks']} tasks, "
             f"{h['second_half_untrusted_results']} of them by the gateway workers): "
             f"{h['overhead_fraction']:.3f} extra task-seconds per useful one after warm-up. "
             "An all-trusted pool takes none of these paths: its makespan is the scheduling "
             "section's."), ""]
    return out


def write_doc(v: dict[str, Any], folder: Path) -> None:
    """Verification's block of ``folder/BENCHMARKS.md``."""
    import report

    write_block(folder, "verify", section(v, report._table))


def main(argv: list[str] | None = None) -> int:
    """Run the section alone (a private redis-server); its JSON and doc block if asked."""
    return section_main("benchmarks/verify.py", __doc__, run_section, write_doc, targets, argv,
                        quick_help="two repeats of the 30 % liar, fewer jobs",
                        repeats_help="repeats of the 30 % liar [default: 2 quick, else 5]")


if __name__ == "__main__":
    sys.exit(main())
