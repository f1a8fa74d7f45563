"""The benchmarks of the product's own path (``benchmarks/worker_throughput.py``,
``benchmarks/latency.py``): their harness runs real ``nova-queue worker`` processes and
reads what it reports off the event stream; their targets and blocks render from figures.

Speed is not judged here (``benchmarks/run.py`` measures it): the tests check that every
task is counted, the window is the job's, and the samples are the ones asked for.
"""

from __future__ import annotations

import pytest


@pytest.mark.slow
def test_real_workers_run_every_task_and_the_window_is_the_jobs(bench, server, tmp_path):
    wt = bench("worker_throughput")
    site = wt.install_app(tmp_path)
    res = wt.worker_rate(server, tmp_path, site, 2, 60, concurrency=2, ready_timeout_s=120,
                         run_timeout_s=120)
    assert (res["processes"], res["concurrency"], res["tasks"]) == (2, 2, 60)
    assert 0 < res["seconds"] < 120
    assert res["tasks_per_s"] == pytest.approx(60 / res["seconds"])
    assert res["scripts"]["calls"] > 0  # the workers went through Redis's scripts
    # the namespace was dropped after the run: nothing of it is left
    assert server.client().dbsize() == 0
    logs = sorted(tmp_path.glob("w*.log"))
    assert len(logs) == 2


@pytest.mark.slow
def test_latency_samples_come_from_a_real_idle_worker(bench, server, tmp_path):
    lat = bench("latency")
    res = lat.nova_latency(server, tmp_path, 12)
    for part in ("pickup", "result"):
        assert res[part]["samples"] == 12
        assert res[part]["p50_ms"] <= res[part]["p99_ms"] <= res[part]["max_ms"]
    # a task is claimed before the client sees it finished (stamps are whole ms: ≤ 1 ms slack)
    assert res["pickup"]["p50_ms"] <= res["result"]["p50_ms"] + 1
    assert res["result"]["p50_ms"] > 0


def test_percentiles_are_nearest_rank(bench):
    lat = bench("latency")
    got = lat.percentiles([float(x) for x in range(1, 101)])
    assert (got["p50_ms"], got["p90_ms"], got["p99_ms"], got["max_ms"]) == (50, 90, 99, 100)
    assert lat.percentiles([3.0])["p99_ms"] == 3.0


def test_the_real_worker_and_latency_targets_and_blocks_render(bench, tmp_path):
    rt, lat = bench("report_throughput"), bench("latency")
    worker = {"rows": [{"processes": 1, "concurrency": 1, "tasks_per_s": 310.0,
                        "redis_cpu_us_per_task": 160.0},
                       {"processes": 2, "concurrency": 1, "tasks_per_s": 520.0,
                        "redis_cpu_us_per_task": 150.0}],
              "tasks": 3000, "repeats": 3, "best_tasks_per_s": 520.0, "best_processes": 2,
              "best_concurrency": 1, "best_redis_cpu_us_per_task": 150.0,
              "one_process_tasks_per_s": 310.0, "how": "real workers"}
    t = {"worker": worker, "nova_worker_over_bullmq": 0.052, "bullmq_jobs_per_s": 10000.0,
         "bullmq_best": {"processes": 1, "concurrency": 100}}
    got = {name: (measured, met) for name, measured, met in rt._worker_targets(t)}
    assert got["real workers (`nova-queue worker`, no-op app) ≥ 1.0 × BullMQ's real Worker"] == (
        "0.05 × (520 ÷ 10000 jobs/s; nova at 2 process(es), concurrency 1)", False)
    assert got["one real worker process ≥ 2,000 no-op tasks/s"] == ("310 tasks/s", False)
    missing = {name: met for name, _, met in rt._worker_targets({"rows": []})}
    assert set(missing.values()) == {None}  # a run from before the real workers: n/a

    rt.write_worker_doc(t, tmp_path)
    text = (tmp_path / "BENCHMARKS.md").read_text()
    assert "| 2 | 1 | 520 | 150 |" in text and "0.05×" in text
    assert "a protocol loop" in text

    figures = {"samples": 200, "warmup": 10, "nova_p50_ms": 1.4, "nova_p99_ms": 30.0,
               "rq_p50_ms": 3.3, "bullmq_p50_ms": 0.4,
               "nova": {"pickup": {"p50_ms": 1.4, "p99_ms": 30.0},
                        "result": {"p50_ms": 5.8, "p99_ms": 40.0}},
               "rq": {"pickup": {"p50_ms": 3.3, "p99_ms": 5.6},
                      "result": {"p50_ms": 4.8, "p99_ms": 8.5}},
               "bullmq": {"pickup": {"p50_ms": 0.4, "p99_ms": 3.2},
                          "result": {"p50_ms": 2.1, "p99_ms": 10.3}}}
    rows = {name: (measured, met) for name, measured, met in lat.targets(figures)}
    assert rows["pickup latency (enqueue → first claim, idle pool) p50 ≤ 5 ms"] == (
        "1.4 ms (BullMQ 0.4, RQ 3.3)", True)
    assert rows["pickup latency p99 ≤ 25 ms"] == ("30.0 ms", False)
    lat.write_doc(figures, tmp_path)
    text = (tmp_path / "BENCHMARKS.md").read_text()
    assert "<!-- keep:latency -->" in text and "<!-- keep:worker-throughput -->" in text
    assert "| nova-queue (`nova-queue worker`) | 1.4 | 30.0 | 5.8 | 40.0 |" in text
