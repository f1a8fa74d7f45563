"""The startup self-test with real worker processes: an app whose startup benchmark fails
is not served (one log line naming the fix), and a worker left with no app exits with
EXIT_NO_APP (78) without joining; ``--no-benchmark`` skips the self-test."""

from __future__ import annotations

import json
import signal

import pytest
from novatests.procs import WorkerProc

from nova_queue import NovaClient
from nova_queue.local import wait_for
from nova_queue.workers.runtime import EXIT_NO_APP

pytestmark = pytest.mark.slow


@pytest.fixture
def nova(redis_url, namespace):
    client = NovaClient.from_url(redis_url, namespace=namespace)
    yield client
    client.close()


@pytest.fixture
def procs():
    started: list[WorkerProc] = []
    yield started
    for p in started:
        p.close()


def start(procs, redis_url, namespace, tmp_path, *args, name="w") -> WorkerProc:
    w = WorkerProc(redis_url, namespace, (tmp_path / "store").as_uri(), tmp_path / name,
                   *args, env={"HF_HUB_OFFLINE": "1"}, name=name)
    procs.append(w)
    return w


def unpreparable(tmp_path) -> str:
    path = tmp_path / "control.json"
    path.write_text(json.dumps({"prepare": "fail"}))
    return f"control={path}"


def test_a_worker_whose_only_app_fails_its_self_test_exits_78(procs, nova, redis_url,
                                                              namespace, tmp_path):
    assert EXIT_NO_APP == 78
    w = start(procs, redis_url, namespace, tmp_path, "--app", "synthetic", "-o",
              unpreparable(tmp_path))
    assert w.wait(120) == EXIT_NO_APP, w.output()[-3000:]
    out = w.output()
    assert ("startup self-test of synthetic failed: SimulatedPrepareError: simulated: this "
            "worker cannot prepare synthetic jobs") in out and "; not serving synthetic" in out
    assert "no app passed its startup self-test (synthetic): exiting with code 78" in out
    assert "Traceback" not in out
    assert nova.workers() == []  # it never joined


def test_an_app_that_fails_its_self_test_is_not_served_and_the_fix_is_named(
        procs, nova, redis_url, namespace, tmp_path):
    """txt2img with a model that is not there: the worker serves synthetic only."""
    w = start(procs, redis_url, namespace, tmp_path, "--app", "synthetic", "--app", "txt2img",
              "-o", f"model={tmp_path / 'no-such-model'}")
    wait_for(lambda: nova.eligible_workers("synthetic"), timeout_s=180,
             message="the worker to join")
    [info] = nova.workers()
    assert info.apps == ["synthetic"] and nova.eligible_workers("txt2img") == []
    [line] = [x for x in w.output().splitlines() if "startup self-test of txt2img failed" in x]
    assert "is not available on this worker; to fix: start the worker with -o model=DIR" in line
    assert "NOVA_MODEL_ROOTS" in line and line.endswith("; not serving txt2img")
    w.signal(signal.SIGTERM)
    assert w.wait(60) == 0


def test_no_benchmark_means_no_self_test(procs, nova, redis_url, namespace, tmp_path):
    w = start(procs, redis_url, namespace, tmp_path, "--app", "synthetic", "--no-benchmark",
              "-o", unpreparable(tmp_path))
    wait_for(lambda: nova.eligible_workers("synthetic"), timeout_s=120,
             message="the worker to join")
    assert "startup self-test" not in w.output()
    w.signal(signal.SIGTERM)
    assert w.wait(60) == 0
