"""``nova-queue worker --concurrency N`` (env ``NOVA_CONCURRENCY``): task slots for apps that
declare them safe; a real worker process on a real Redis."""

from __future__ import annotations

import pytest
from novatests.cli import nova_env, run_cli

from nova_queue import NovaClient, TaskSpec


@pytest.mark.slow
@pytest.mark.parametrize("how", ["flag", "env"])
def test_the_worker_takes_its_slots_from_the_flag_or_the_environment(redis_url, namespace,
                                                                     tmp_path, how):
    nova = NovaClient.from_url(redis_url, namespace=namespace)
    try:
        job = nova.enqueue("synthetic", [TaskSpec(f"p{i}", 0.05) for i in range(6)],
                           params={"seconds": 0.05, "size": 64})
        env = nova_env(redis_url, namespace, tmp_path)
        args = ["worker", "--app", "synthetic", "--burst", "--no-benchmark"]
        if how == "flag":
            args += ["--concurrency", "3"]
        else:
            env["NOVA_CONCURRENCY"] = "3"
        done = run_cli(args, env, timeout_s=120, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert "synthetic runs up to 3 tasks at once" in done.stderr
        assert nova.job(job, with_tasks=False).done == 6
    finally:
        nova.close()


@pytest.mark.parametrize("value", ["0", "65", "two"])
def test_a_concurrency_out_of_range_is_refused(invoke, value):
    res = invoke("worker", "--app", "synthetic", "--concurrency", value)
    assert res.exit_code == 2 and "--concurrency" in res.output
