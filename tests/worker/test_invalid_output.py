"""An output the app's ``validate`` rejects is the worker's fault, not the task's (issue 31):
two in-process workers on a real Redis, the synthetic app, one worker's control file making
it return all-black cards. Alone, the broken worker hands every task back without using an
attempt, stores nothing, is marked (the reason names the problem) and claims no more; beside
it, a healthy worker runs the whole job."""

from __future__ import annotations

import json
import threading

import pytest

from nova_queue import NovaClient, TaskSpec
from nova_queue.apps.base import TaskOutput
from nova_queue.errors import InvalidOutput
from nova_queue.local import wait_for
from nova_queue.settings import Settings
from nova_queue.stores import open_store
from nova_queue.workers.apps import load_worker_app
from nova_queue.workers.execute import checked
from nova_queue.workers.runtime import Worker, WorkerOptions

pytestmark = pytest.mark.timeout(120)

REASON = "invalid output: all-black image"


@pytest.fixture
def start_worker(redis_url, namespace, tmp_path):
    running: list[tuple[Worker, threading.Thread]] = []

    def start(name: str, *, broken: bool = False) -> Worker:
        home = tmp_path / name  # its own home: its own node identity
        options = {}
        if broken:
            control = tmp_path / f"{name}.control.json"
            control.write_text(json.dumps({"invalid": "all"}))
            options["control"] = str(control)
        settings = Settings(redis_url=redis_url, namespace=namespace, home=str(home),
                            store_url=(tmp_path / "store").as_uri())
        worker = Worker(settings, WorkerOptions(apps=("synthetic",), name=name,
                                                benchmark=False, device_score_s=0,
                                                app_options=options))
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        running.append((worker, thread))
        return worker

    yield start
    for worker, thread in running:
        worker.stop()
    for _, thread in running:
        thread.join(30)


def alive(nova: NovaClient, name: str):
    return {w.name: w for w in nova.workers() if w.alive}.get(name)


def test_invalid_outputs_are_handed_back_and_the_job_finishes_on_a_healthy_worker(
        start_worker, nova, tmp_path):
    start_worker("broken", broken=True)
    wait_for(lambda: alive(nova, "broken"), timeout_s=60, message="broken to register")
    job = nova.enqueue("synthetic", [TaskSpec(f"t{i}", 0.01) for i in range(8)],
                       params={"seconds": 0.01, "size": 64}, max_attempts=2)
    wait_for(lambda: (w := alive(nova, "broken")) and w.cannot_run, timeout_s=60,
             message="broken to be marked")
    wait_for(lambda: nova.job(job, with_tasks=False).leased == 0, timeout_s=30,
             message="every lease back")
    st = nova.job(job)
    assert (st.pending, st.done, st.failed) == (8, 0, 0)
    assert max(t.attempt_count for t in st.tasks) == 0  # no attempt used
    mark = alive(nova, "broken").cannot_run[0]
    assert (mark.app, mark.reason) == ("synthetic", REASON)
    assert list(open_store((tmp_path / "store").as_uri()).list()) == []  # nothing stored
    runners = nova.who_can_run("synthetic", (), "")
    assert runners.eligible == [] and [b.name for b in runners.blocked] == ["broken"]

    start_worker("healthy")
    wait_for(lambda: nova.job(job, with_tasks=False).finished, timeout_s=60,
             message="the job to finish on the healthy worker")
    st = nova.job(job)
    assert (st.state, st.done, st.failed) == ("done", 8, 0)
    assert {t.worker_name for t in st.tasks} == {"healthy"}
    assert max(t.attempt_count for t in st.tasks) == 1
    handed = [e for e in nova.events(count=100_000)
              if e.type == "requeued" and e.fields.get("kind") == "invalid"]
    assert handed and all(e.fields["error"] == REASON for e in handed)
    assert all(e.fields["attempt"] == "0" for e in handed)
    broken = {w.name: w for w in nova.workers()}["broken"]
    assert broken.failures >= len(handed)  # counted against the worker, not the tasks
    assert len(list(open_store((tmp_path / "store").as_uri()).list())) == 8  # healthy's only


def test_checked_turns_a_rejected_output_into_its_error():
    app = load_worker_app("synthetic")
    black = TaskOutput(b"\x89PNG garbage", "image/png", "png")
    got = checked(app.runner, black)
    assert isinstance(got, InvalidOutput) and str(got).startswith("invalid output: not a")
    error = RuntimeError("boom")
    assert checked(app.runner, error) is error


def test_synthetic_cards_pass_validate_and_a_black_one_does_not(tmp_path):
    from nova_queue.apps.base import AppContext, TaskInput

    control = tmp_path / "control.json"
    app = load_worker_app("synthetic")
    app.runner.setup(AppContext(backend="cpu", device="cpu", device_name="cpu", worker_id="w",
                                worker_name="w", options={"control": str(control)}))
    task = TaskInput(task_id="j:0", job_id="j", index=0, input="a prompt", cost=0.01,
                     params=app.spec.parse_params({"seconds": 0.0, "size": 64}), attempt=1,
                     lease_gen=1, attempt_id="a")
    card = app.runner.run_batch([task])[0]
    app.runner.validate(card)
    control.write_text(json.dumps({"invalid": "all", "times": 1}))
    black = app.runner.run_batch([task])[0]
    with pytest.raises(InvalidOutput, match=REASON):
        app.runner.validate(black)
    app.runner.validate(app.runner.run_batch([task])[0])  # "times": 1, then healthy again
