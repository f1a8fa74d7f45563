"""Task slots (``worker --concurrency N``): up to N batches at once in one process for an app
that declares it safe, one slot for any other; one registration, every lease fenced. An
in-process worker on a real Redis; the synthetic runner is wrapped only to count how many of
its batches run at once."""

from __future__ import annotations

import logging
import threading

import pytest

from nova_queue import NovaClient, TaskSpec
from nova_queue.apps.txt2img import Txt2ImgSpec
from nova_queue.settings import Settings
from nova_queue.workers.apps import WorkerApp, load_worker_app
from nova_queue.workers.runtime import Worker, WorkerOptions
from nova_queue.workers.slots import app_slots


def test_only_apps_that_declare_it_get_more_than_one_slot(caplog):
    apps = {"synthetic": load_worker_app("synthetic"), "txt2img": WorkerApp(Txt2ImgSpec(), None)}
    with caplog.at_level(logging.INFO, logger="nova_queue.workers.slots"):
        assert app_slots(apps, 4) == {"synthetic": 4, "txt2img": 1}
    assert ("txt2img runs one task at a time: it does not declare itself safe to run tasks "
            "at once (--concurrency 4 applies to the other apps)") in caplog.text
    assert app_slots(apps, 1) == {"synthetic": 1, "txt2img": 1}


# one slot runs the 12 tasks of 0.3 s one after another: about 6 s
@pytest.mark.parametrize("concurrency", [pytest.param(1, marks=pytest.mark.slow), 4])
def test_a_worker_runs_up_to_n_tasks_at_once(redis_url, namespace, tmp_path, concurrency):
    settings = Settings(redis_url=redis_url, namespace=namespace, home=str(tmp_path),
                        store_url=(tmp_path / "store").as_uri())
    worker = Worker(settings, WorkerOptions(apps=("synthetic",), benchmark=False,
                                            device_score_s=0, burst=True,
                                            concurrency=concurrency))
    nova = NovaClient.from_settings(settings)
    try:
        job = nova.enqueue("synthetic", [TaskSpec(f"p{i}", 0.3) for i in range(12)],
                           params={"seconds": 0.3, "size": 64})
        worker.setup()
        at_once, lock = [0, 0], threading.Lock()  # now, most
        runner = worker.apps["synthetic"].runner
        real = runner.run_batch

        def counted(tasks):
            with lock:
                at_once[0] += 1
                at_once[1] = max(at_once)
            try:
                return real(tasks)
            finally:
                with lock:
                    at_once[0] -= 1

        runner.run_batch = counted
        # a measured speed, as after its first tasks: the claims may grant several
        nova.redis.hset(nova.keys.worker(worker.worker_id),
                        mapping={"ema:synthetic": 1.0, "n:synthetic": 5})
        loop = threading.Thread(target=worker._loop, daemon=True)
        loop.start()
        loop.join(90)
        assert not loop.is_alive(), "worker loop did not finish in time"
        st = nova.job(job)
        assert (st.done, st.state) == (12, "done")
        assert {t.attempt_count for t in st.tasks} == {1}
        assert {t.worker_id for t in st.tasks} == {worker.worker_id}
        if concurrency == 1:
            assert at_once[1] == 1
        else:
            assert 1 < at_once[1] <= concurrency
        assert len(nova.workers()) == 1  # one registration
        assert nova.redis.scard(nova.keys.held(worker.worker_id)) == 0
    finally:
        worker._shutdown()
        nova.close()
