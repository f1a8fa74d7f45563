"""The demo says what its workers are doing while nothing finishes (joining: their start-up
benchmark loads the model; loading a job's model), instead of printing "0/16 done" and
then nothing for a minute."""

from __future__ import annotations

from novatests.leases import join

from nova_queue import TaskSpec
from nova_queue.cli.demo_pool import Demo, DemoOptions


def test_the_demo_says_what_the_workers_do(nova, tmp_path):
    demo = Demo(DemoOptions(data=tmp_path / "demo"))
    demo.client = nova
    job = nova.enqueue("synthetic", [TaskSpec("a", 1.0)], model="tiny-model")
    st = nova.job(job, with_tasks=False)
    assert demo._what_workers_do(st).startswith("waiting for the workers to join (each runs "
                                                "its start-up benchmark first; logs in ")
    join(nova, "demo-1-x1")
    nova.claim("demo-1-x1", "synthetic")
    assert demo._what_workers_do(nova.job(job, with_tasks=False)) == ""
    nova.note_loading("demo-1-x1", "synthetic", "tiny-model")
    assert demo._what_workers_do(nova.job(job, with_tasks=False)).startswith(
        "loading model on demo-1-x1 (")
