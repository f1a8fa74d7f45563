"""The verification benchmark (``benchmarks/verify.py``): its harness runs real direct and
gateway worker processes, catches a liar and counts what is left; its targets and block
render from figures. How often and how fast it catches is measured by ``benchmarks/run.py``
(docs/BENCHMARKS.md), not judged here."""

from __future__ import annotations

import pytest


@pytest.fixture
def verify(bench):
    return bench("verify")


@pytest.mark.slow
def test_a_liar_on_every_task_is_caught_and_leaves_no_wrong_result(verify, server, tmp_path):
    case = verify.liar_case(server, tmp_path, {"lie": 1.0})
    assert case["caught"] and case["wrong"] == 0 and case["verify_runs"] >= 1
    assert 1 <= case["committed_before_caught"] <= case["tasks"]


def figures(**changes):
    case = {"jobs": 2, "tasks": 100, "caught": True, "committed_before_caught": 12,
            "reopened": 7, "verify_runs": 20, "wrong": 0}
    v = {"cases": {"30 %": [case, {**case, "committed_before_caught": 30}]},
         "honest": {"tasks": 400, "verify_runs_first_half": 30, "verify_runs_second_half": 12,
                    "second_half_tasks": 200, "second_half_untrusted_results": 90,
                    "overhead_fraction": 0.06, "wrong": 0},
         "repeats": 2, "wrong_results_accepted": 0, "detected_after_tasks": 21, "uncaught": 0,
         "honest_overhead_fraction": 0.06, "seconds": 0.02, "job_tasks": 50, "max_jobs": 12,
         "load_avg": [1.0, 0.5]}
    v.update(changes)
    return v


def test_targets_and_block_render_from_figures(verify, tmp_path):
    got = {name: (measured, met) for name, measured, met in verify.targets(figures())}
    assert list(got.values()) == [("0 (0 case(s) not caught)", True), ("21", False),
                                  ("0.060", True)]
    missing = verify.targets(None)
    assert [met for _, _, met in missing] == [None, None, None]
    verify.write_doc(figures(), tmp_path)
    doc = (tmp_path / "BENCHMARKS.md").read_text()
    assert "<!-- keep:verify -->" in doc and "| 30 % | 2 | 100 | yes | 12 | 7 | 20 | 0 |" in doc
    assert "0.060 extra task-seconds per useful one" in doc
