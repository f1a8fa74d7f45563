"""The benchmark's optimum T* on hand-computed fleets, and that ``benchmarks/run.py`` starts.

The benchmarks themselves are not run here: speed is measured by ``benchmarks/run.py``,
tests check correctness.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from novatests.bench import BENCH, load_bench

_load = load_bench


optimum = _load("optimum")


@pytest.mark.parametrize("starts, times, n, ends, expected", [
    # one worker: N back-to-back tasks
    ([0.0], [1.0], 3, None, 3.0),
    # finishing instants 1,2,3,… and 2,4,…: the 3rd smallest is 2 (⌊2/1⌋ + ⌊2/2⌋ = 3)
    ([0.0, 0.0], [1.0, 2.0], 3, None, 2.0),
    # start-up: 6,7,8,9 and 4,8,12 -> sorted 4,6,7,8,8: the 4th is 8
    ([5.0, 0.0], [1.0, 4.0], 4, None, 8.0),
    # a worker stopped at 2.5 finishes only 2 tasks: 1,2 and 1,2,3,4 -> the 6th is 4
    ([0.0, 0.0], [1.0, 1.0], 6, [2.5, math.inf], 4.0),
    # a worker that never joined does not count
    ([math.inf, 0.0], [0.1, 1.0], 2, None, 2.0),
    # the fleet shape (1×, 1.5×, 10×, 80×), no start-up, 64 tasks of 1 s:
    # at T = 36: 36 + 24 + 3 + 0 = 63 tasks; the next finishing instant is the 1× worker's
    # 37th task at 37 (the 1.5× worker's 25th is at 37.5): 37 + 24 + 3 + 0 = 64
    ([0.0] * 4, [1.0, 1.5, 10.0, 80.0], 64, None, 37.0),
    # nothing to do
    ([0.0], [1.0], 0, None, 0.0),
])
def test_optimal_makespan_hand_computed(starts, times, n, ends, expected):
    assert optimum.optimal_makespan(starts, times, n, ends) == pytest.approx(expected)


def test_optimal_makespan_infeasible_and_invalid():
    # two killed workers can do 2 + 1 tasks, never 4
    assert optimum.optimal_makespan([0, 0], [1, 2], 4, [2.0, 3.0]) == math.inf
    assert optimum.optimal_makespan([0], [0.0], 1) == math.inf  # no usable worker
    with pytest.raises(ValueError):
        optimum.optimal_makespan([0, 0], [1], 1)


@settings(max_examples=200, deadline=None)
@given(workers=st.lists(st.tuples(st.floats(0, 5), st.floats(0.05, 4)), min_size=1, max_size=5),
       n=st.integers(1, 60))
def test_optimum_is_the_smallest_feasible_instant(workers, n):
    starts, times = [w[0] for w in workers], [w[1] for w in workers]
    best = optimum.optimal_makespan(starts, times, n)
    # feasible at T* ...
    assert optimum.tasks_done_by(best, starts, times) >= n
    # ... and at no earlier instant (the count only changes at finishing instants)
    assert optimum.tasks_done_by(best - 1e-6, starts, times) < n


def test_static_split():
    # worker 2 (start 1, tasks 2 + 2) is last at 5
    assert optimum.static_split_makespan([0.0, 1.0], [[1.0, 1.0], [2.0, 2.0]]) == 5.0


def test_run_help_works():
    out = subprocess.run([sys.executable, str(BENCH / "run.py"), "--help"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert "--quick" in out.stdout and "--json" in out.stdout


def test_run_writes_no_files_unless_asked(tmp_path):
    """Without ``--docs`` or ``--json`` a run only prints: the tracked docs/ stay untouched
    (a user who wants the numbers must not get a dirty checkout)."""
    saved = Path(__file__).resolve().parent / "data" / "bench-results-2026-11-30.json"
    docs = BENCH.parent / "docs"
    before = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in docs.iterdir()
              if p.is_file()}
    out = subprocess.run([sys.executable, str(BENCH / "run.py"), "--from-json", str(saved)],
                         capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "100k tasks enqueued in < 1 s: 0.90 s" in out.stdout  # the targets are printed
    assert "no files written" in out.stderr
    after = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in docs.iterdir()
             if p.is_file()}
    assert after == before
    assert list(tmp_path.iterdir()) == []


def test_doc_blocks_are_replaced_in_place_and_kept(tmp_path):
    docsection = _load("docsection")
    kept_blocks, put_block = docsection.kept_blocks, docsection.put_block

    doc = tmp_path / "BENCHMARKS.md"
    doc.write_text("# Benchmarks\n\ngenerated part\n")
    put_block(doc, "txt2img:cpu:tiny:64x64", "first run")
    put_block(doc, "txt2img:cuda:full:512x512", "gpu run")
    put_block(doc, "txt2img:cpu:tiny:64x64", "second run")
    text = doc.read_text()
    assert text.count("keep:txt2img:cpu:tiny:64x64 -->") == 2 and "first run" not in text
    assert text.index("second run") < text.index("gpu run")
    blocks = kept_blocks(text)
    assert [b.splitlines()[1] for b in blocks] == ["second run", "gpu run"]


def test_docs_render_from_a_saved_run(tmp_path, monkeypatch):
    """``run.py --from-json`` re-renders BENCHMARKS.md and the plots from a real run's
    results (the full run of 2026-11-30), keeping the txt2img blocks."""
    import json

    saved = Path(__file__).resolve().parent / "data" / "bench-results-2026-11-30.json"
    res = json.loads(saved.read_text())
    doc = tmp_path / "BENCHMARKS.md"
    doc.write_text("old text\n\n<!-- keep:txt2img:x -->\na GPU run\n<!-- /keep:txt2img:x -->\n")
    out = subprocess.run([sys.executable, str(BENCH / "run.py"), "--from-json", str(saved),
                          "--docs", str(tmp_path)],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    text = doc.read_text()
    assert "old text" not in text and text.rstrip().endswith("<!-- /keep:txt2img:x -->")
    enqueue = res["scale"]["enqueue_100k_s"]
    assert f"| 100k tasks enqueued in < 1 s | {enqueue:.2f} s | " \
           f"{'**met**' if enqueue < 1 else '**missed**'} |" in text
    ratio = res["throughput"]["nova_over_rq"]
    assert f"{ratio:.1f} × (paired per repeat at 1 / 2 / 4 processes: " in text
    for heading in ("## 1–2. Scheduling quality", "## 3. Lifecycle throughput",
                    "## 4. Scale", "## 5. Recovery", "## What moved the missed targets"):
        assert heading in text
    assert {p.name for p in tmp_path.glob("*.png")} == {
        "bench-makespan.png", "bench-throughput.png", "bench-recovery.png"}
    # every target, as the report computes it, is in the document's table
    monkeypatch.syspath_prepend(str(BENCH))  # report imports its sibling modules
    targets = _load("report").targets(res)
    # the saved run predates gray failures, placement, the gateway, the soak, BullMQ, the
    # real workers, the latency, the verification and the cost sections
    assert len(targets) == 33
    assert [t["met"] for t in targets if "BullMQ" in t["target"]] == [None, None]  # not run
    assert [t["met"] for t in targets if "real worker" in t["target"]] == [None, None]
    assert [t["met"] for t in targets if "latency" in t["target"]] == [None, None]
    assert [t["met"] for t in targets if "hung task" in t["target"]] == [None]  # not run
    assert [t["met"] for t in targets if t["target"].startswith("soak")] == [None]
    assert [t["met"] for t in targets if t["target"].startswith("verify")] == [None] * 3
    assert [t["met"] for t in targets if t["target"].startswith("cost")] == [None] * 3
    for t in targets:
        assert f"| {t['target']} | {t['measured']} |" in text


def test_the_1m_enqueue_target_reads_the_1m_row(monkeypatch):
    """The 1M-task row of a full run's scale section is its target's figure; a quick run
    (no 1M row) leaves the target not run."""
    import json

    saved = Path(__file__).resolve().parent / "data" / "bench-results-2026-11-30.json"
    scale = json.loads(saved.read_text())["scale"]
    (one_m,) = [x for x in scale["rows"] if x["tasks"] == 1_000_000]
    monkeypatch.syspath_prepend(str(BENCH))
    targets = _load("report").targets

    def row(res):
        return [(t["measured"], t["met"]) for t in targets(res) if t["target"].startswith("1M")]

    figure = f"{one_m['seconds']:.2f} s (Lua {one_m['redis_script_s']:.2f} s)"
    assert row({"scale": scale}) == [(figure, one_m["seconds"] < 5)]
    quick = {**scale, "rows": [x for x in scale["rows"] if x["tasks"] < 1_000_000]}
    assert row({"scale": quick}) == [("—", None)]


def test_the_headline_is_the_real_workers_figure(monkeypatch):
    """The document opens with what users run beside BullMQ's real Worker; the protocol
    loop comes after it, named as the queue's ceiling. A run without real workers: none."""
    monkeypatch.syspath_prepend(str(BENCH))
    headline = _load("report_throughput").headline
    worker = {"best_processes": 2, "best_tasks_per_s": 25381.4, "one_process_tasks_per_s": 16502}
    t = {"worker": worker, "nova_worker_over_bullmq": 1.33, "bullmq_jobs_per_s": 19083,
         "rows": [{"nova_tasks_per_s": 23570}, {"nova_tasks_per_s": 37388}]}
    text = headline(t)
    assert text.startswith("**Headline (what users run):** 2 real `nova-queue worker`")
    assert "25381 tasks/s, one process 16502" in text and "19083 jobs/s" in text
    assert "**1.33 ×**" in text and text.index("1.33") < text.index("protocol loop")
    assert "ceiling, not the product's rate) ran 37388 tasks/s" in text
    assert headline({"rows": t["rows"]}) is None and headline(None) is None


def test_a_section_merged_from_a_later_run_is_named_in_the_first_paragraph(monkeypatch):
    """A section re-run after a fix and merged into a full run's results by hand: the
    document's opening paragraph says which section and how it was run."""
    import json

    saved = Path(__file__).resolve().parent / "data" / "bench-results-2026-11-30.json"
    res = json.loads(saved.read_text())
    monkeypatch.syspath_prepend(str(BENCH))
    markdown = _load("report").markdown
    assert "later run" not in markdown(res).split("\n\n")[1]
    res["later"] = {"scale": "`--only scale` after abc1234"}
    first = markdown(res).split("\n\n")[1]
    assert first.startswith("Generated by") and first.endswith(
        "The scale section's figures (its block and its targets) are from a later run: "
        "`--only scale` after abc1234.")


def test_the_soak_figures_and_their_render(tmp_path, monkeypatch):
    """``soak.summarize`` on samples of known memory: the growth from the end of the warm-up
    to the end (each a mean of 3 samples), the throughput held; then its plot and section."""
    monkeypatch.syspath_prepend(str(BENCH))
    soak, plots = _load("soak"), _load("plots")
    samples = [{"t_s": 5.0 * i, "used_memory": 1_000_000 + (0 if i < 12 else 10_000 * (i - 11)),
                "keys": 100, "done": 30 * i, "pending": 0, "events": 0, "jobs": 1}
               for i in range(25)]
    out = soak.summarize(samples, 60.0, 500, 120.0)
    assert out["memory_after_warmup_bytes"] == 1_010_000  # t = 55, 60, 65 s
    assert out["memory_end_bytes"] == 1_120_000  # t = 110, 115, 120 s
    assert out["memory_growth_after_warmup_pct"] == pytest.approx(100 * 110_000 / 1_010_000)
    assert out["tasks_per_s_after_warmup"] == pytest.approx(6.0)
    assert out["keys_growth_after_warmup_pct"] == 0
    plots.soak_plot(out, tmp_path / "soak.png")
    assert (tmp_path / "soak.png").stat().st_size > 1000
    text = "\n".join(soak.markdown(out, _load("report")._table))
    assert "| Redis used_memory |" in text and "+10.9 %" in text


def test_a_partial_run_rewrites_only_its_own_block(tmp_path, monkeypatch):
    """``run.py --only placement --docs DIR`` writes the placement block and leaves the rest
    of BENCHMARKS.md (a full run's targets and sections, other blocks) as it was."""
    monkeypatch.syspath_prepend(str(BENCH))
    run = _load("run")
    placement = {
        "fair": {"fractions": {"alice": 0.33, "bob": 0.34, "carol": 0.33}, "max_deviation": 0.02,
                 "late_start_s": 0.05, "task_s": 0.3, "late_finish_s": 3.0,
                 "late_fair_finish_s": 8.0},
        "cost": {"workers": 100, "jobs": 50, "owners": 10,
                 "fair_claim": {"cpu_us_per_call": 430.0}},
        "fair_claim_us": 421.7, "plain_claim_us": 323.0, "policy_scan_us": 2134.0,
        "fair_over_plain": 1.3, "fair_over_scan": 0.2}
    machine = {"date": "2026-12-02 01:00 UTC", "load_avg_start": 2.0, "cores": 2}
    monkeypatch.setattr(run, "run", lambda args: {"quick": True, "machine": machine,
                                                   "placement": placement, "duration_s": 60.0})
    doc = tmp_path / "BENCHMARKS.md"
    full = "# Benchmarks\n\nthe full run's targets and sections\n"
    doc.write_text(full + "\n<!-- keep:soak -->\nthe soak\n<!-- /keep:soak -->\n")
    assert run.main(["--only", "placement", "--docs", str(tmp_path)]) == 0
    text = doc.read_text()
    assert text.startswith(full) and "the soak" in text
    block = text[text.index("<!-- keep:placement -->"):text.index("<!-- /keep:placement -->")]
    assert "## 6. Placement" in block and "2026-12-02 01:00 UTC" in block
    assert "| Redis time per claim, 100 workers, 50 jobs, 10 owners ≤ 200 µs | 422 µs" in block
    assert "**missed**" in block and "alice 33.0 %" in block
    assert list(tmp_path.glob("*.png")) == []  # the full run's plots are not redrawn


def test_bullmq_is_skipped_with_a_note_without_node(tmp_path, monkeypatch):
    """Without ``node`` and ``npm`` on PATH the throughput section runs without BullMQ and
    says why (no error, no npm call)."""
    monkeypatch.syspath_prepend(str(BENCH))
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no node, no npm
    bull = _load("bullmq").setup()
    assert bull["available"] is False
    assert "node and npm not on PATH" in bull["note"]


def _point(rate: float, cpu: float) -> dict:
    """One run's figures: a third of its Redis CPU inside 1.5 scripts per task."""
    return {"tasks_per_s": rate, "redis_cpu_us_per_task": cpu,
            "redis_script_us_per_task": cpu / 3, "scripts_per_task": 1.5,
            "redis_commands_per_task": cpu / 10}


def test_bullmq_figures_and_their_render(monkeypatch):
    """The throughput section's BullMQ figures from per-repeat points of known rates: medians
    per process count, nova ÷ BullMQ paired per repeat against BullMQ's better concurrency,
    best ÷ best, Redis CPU at each one's best; then the targets and the section's columns."""
    monkeypatch.syspath_prepend(str(BENCH))
    throughput, report = _load("throughput"), _load("report")
    # (nova, RQ, BullMQ c=1, BullMQ c=100) rates of two repeats per process count
    rates = {1: [(2000, 200, 1500, 8000), (2200, 220, 1500, 4400)],
             2: [(3000, 300, 2000, 6000), (3000, 300, 2000, 6000)],
             4: [(3600, 360, 2400, 5000), (3400, 340, 2400, 5000)]}
    rows = [throughput._row(p, {"nova": [_point(r[0], 150.0 - p) for r in reps],
                                "rq": [_point(r[1], 900.0) for r in reps],
                                1: [_point(r[2], 90.0) for r in reps],
                                100: [_point(r[3], 40.0 + p) for r in reps]}, True)
            for p, reps in rates.items()]
    assert rows[0]["bullmq_c100_jobs_per_s"] == 6200  # median of 8000 and 4400
    assert rows[0]["nova_over_bullmq"] == pytest.approx((2000 / 8000 + 2200 / 4400) / 2)
    bull = {"available": True, "bullmq": "6.7.0", "ioredis": "6.0.0", "node": "v20",
            "node_path": "/x"}
    t = throughput._summary(rows, bull)
    assert t["bullmq"] == {k: v for k, v in bull.items() if k != "node_path"}
    assert (t["bullmq_jobs_per_s"], t["bullmq_best"]) == (6200, {"processes": 1,
                                                                  "concurrency": 100})
    assert t["nova_over_bullmq"] == pytest.approx(3500 / 6200)  # nova's best: 4 processes
    assert (t["nova_redis_cpu_us_per_task"], t["bullmq_redis_cpu_us_per_job"]) == (146.0, 41.0)
    _check_bullmq_render(report, t, rows)


def _check_bullmq_render(report, t: dict, rows: list[dict]) -> None:
    """The BullMQ targets and the throughput section's columns, from a saved run with
    these figures."""
    import json

    saved = Path(__file__).resolve().parent / "data" / "bench-results-2026-11-30.json"
    res = json.loads(saved.read_text())
    res["throughput"].update(t, rows=rows, tasks={"nova": 10, "rq": 3, "bullmq": 10})
    got = {x["target"]: (x["measured"], x["met"]) for x in report.targets(res)}
    assert got["protocol loop (NovaClient, no app, no store) ≥ 1.0 × BullMQ (best ÷ best)"] == (
        "0.56 × (3500 ÷ 6200 jobs/s, BullMQ at 1 process(es), concurrency 100)", False)
    assert got["Redis CPU ≤ 40 µs per task at the protocol loop's best configuration"] == (
        "146 µs (4 process(es); BullMQ 41 µs per job at its best)", False)
    text = report.markdown(res)
    assert "| BullMQ c=1 jobs/s | BullMQ c=100 jobs/s | nova ÷ RQ | nova ÷ BullMQ |" in text
    assert "| 1 | 2100 | 210 | 1500 | 6200 | 10.0 | 0.38 | 149 | 900 | 90 | 41 |" in text
    assert "BullMQ 6.7.0 (ioredis 6.0.0, Node v20)" in text
    assert "nova ÷ BullMQ 0.56: Redis spends 146 µs of CPU per nova task" in text
    # scripts and commands per task, the time inside the scripts (a third of the CPU here)
    assert "| nova-queue | 4 | 146 | 1.50 | 14.6 | 49 |" in text
    assert "| BullMQ c=100 | 2 | 42 | 1.50 | 4.2 | 14 |" in text
