"""A real gateway process and real workers that have only a token: jobs end to end on the
S3 store, a revoked token stops its worker, the CLI's tokens commands."""

from __future__ import annotations

import pytest
from novatests.chaos.fleet import no_tracebacks
from novatests.gateway import GatewayProc, gateway_worker

from nova_queue import NovaClient, TaskSpec, tokens
from nova_queue.local import wait_for
from nova_queue.stores import open_store

pytestmark = pytest.mark.slow


@pytest.mark.s3
def test_a_job_runs_through_a_gateway_on_s3(redis_url, namespace, s3_store_url, tmp_path):
    admin = NovaClient.from_url(redis_url, namespace=namespace)
    gw = GatewayProc(redis_url, namespace, s3_store_url, tmp_path / "gw")
    token = tokens.create(admin, "laptop", apps=("synthetic",))
    job = admin.enqueue("synthetic", [TaskSpec(f"p{i}", 0.05) for i in range(6)],
                        params={"seconds": 0.05, "size": 64})
    w = gateway_worker(gw.url, token, namespace, tmp_path / "w", "--app", "synthetic",
                       "--no-benchmark", "--burst", name="laptop")
    try:
        assert w.wait(120) == 0, w.output()
        no_tracebacks([w])
        st = admin.job(job)
        assert st.state == "done" and st.done == 6
        store = open_store(s3_store_url)
        for t in st.tasks:
            obj = store.get(t.result)
            assert obj.metadata["token"] == "laptop" and obj.metadata["worker-id"] == t.worker_id
        assert token not in w.output() and token not in gw.output()  # no secrets in logs
        (info,) = admin.workers()
        assert info.token == "laptop" and info.worker_id.startswith("laptop.")
    finally:
        w.close()
        gw.close()
        admin.close()


def test_a_revoked_token_stops_its_worker_and_its_task_runs_elsewhere(
        redis_url, namespace, tmp_path):
    admin = NovaClient.from_url(redis_url, namespace=namespace, lease_ttl_s=4.0,
                                heartbeat_interval_s=0.5)
    gw = GatewayProc(redis_url, namespace, (tmp_path / "store").as_uri(), tmp_path / "gw",
                     env={"NOVA_LEASE_TTL_S": "4", "NOVA_HEARTBEAT_INTERVAL_S": "0.5"})
    bad, good = tokens.create(admin, "bad"), tokens.create(admin, "good")
    job = admin.enqueue("synthetic", [TaskSpec("long", 1.0)], params={"seconds": 3.0})
    w = gateway_worker(gw.url, bad, namespace, tmp_path / "bad", "--app", "synthetic",
                       "--no-benchmark", name="bad")
    try:
        wait_for(lambda: admin.job(job, with_tasks=False).leased == 1, 60,
                 message="the bad worker's lease")
        tokens.revoke(admin, "bad")
        assert admin.job(job, with_tasks=False).pending == 1  # back in the queue at once
        assert w.wait(30) == 1 and "revoked" in w.output()
        rescuer = gateway_worker(gw.url, good, namespace, tmp_path / "good", "--app",
                                 "synthetic", "--no-benchmark", "--burst", name="good")
        assert rescuer.wait(60) == 0, rescuer.output()
        t = admin.job(job).tasks[0]
        assert t.state == "done" and t.worker_id.startswith("good.")
    finally:
        w.close()
        gw.close()
        admin.close()


def test_the_tokens_commands(redis_url, namespace):
    from click.testing import CliRunner

    from nova_queue.cli import cli

    env = {"NOVA_REDIS_URL": redis_url, "NOVA_NAMESPACE": namespace}
    run = CliRunner().invoke
    res = run(cli, ["tokens", "create", "pc", "--app", "synthetic", "--label", "gpu=4090"],
              env=env)
    assert res.exit_code == 0, res.output
    token = res.stdout.strip().splitlines()[0]
    assert len(token) >= 40
    res = run(cli, ["tokens", "list", "--json"], env=env)
    assert res.exit_code == 0 and '"gpu": "4090"' in res.output and token not in res.output
    res = run(cli, ["tokens", "revoke", "pc"], env=env)
    assert res.exit_code == 0 and "revoked" in res.output
    res = run(cli, ["tokens", "revoke", "pc"], env=env)
    assert res.exit_code == 1 and "no token named 'pc'" in res.output
    res = run(cli, ["tokens", "create"], env=env)
    assert res.exit_code == 1 and "needs a NAME" in res.output
    res = run(cli, ["tokens", "list"], env=env)
    assert res.exit_code == 0 and res.output.strip() == "no tokens"
    res = run(cli, ["worker", "--token", "x"], env=env)
    assert res.exit_code == 1 and "--gateway" in res.output


def _serve_then_stop(argv: list[str], env: dict[str, str], url: str, stop: int) -> dict:
    """Start the gateway, wait until it answers, send a body over its limit (413), stop it
    with ``stop``: a hello's answer headers (it must exit 0, with no traceback)."""
    import subprocess

    import requests

    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    session = requests.Session()

    def answers() -> bool:
        assert proc.poll() is None, proc.stderr.read()
        try:
            return session.post(url + "/v1/hello", timeout=2).status_code == 401
        except requests.RequestException:
            return False

    try:
        wait_for(answers, timeout_s=60, interval_s=0.05, message="the gateway")
        headers = dict(session.post(url + "/v1/hello", timeout=5).headers)
        too_big = session.post(url + "/v1/complete", data=b"x" * (2048 + 256 * 1024),
                               headers={"Content-Type": "application/x-nova-commit",
                                        "X-Nova-Commit-Length": "2"}, timeout=10)
        assert too_big.status_code == 413, too_big.text  # refused before it is read
        proc.send_signal(stop)
        assert proc.wait(15) == 0
        assert "Traceback" not in proc.stderr.read()
        return headers
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


@pytest.mark.parametrize("server", ["waitress", "werkzeug"])
def test_the_gateway_serves_until_interrupted(redis_url, namespace, tmp_path, server):
    """``nova-queue gateway --server S`` answers, refuses a body over its size limit (413),
    keeps a worker's connection alive with waitress (werkzeug's server closes each one),
    and exits 0 on Ctrl-C (SIGINT) or SIGTERM (``docker stop``)."""
    import os
    import signal
    import sys

    from nova_queue.local import free_port

    port = free_port()
    env = {**os.environ, "NOVA_REDIS_URL": redis_url, "NOVA_NAMESPACE": namespace,
           "NOVA_STORE_URL": (tmp_path / "store").as_uri(),
           "NOVA_GATEWAY_MAX_RESULT_BYTES": "2048"}
    code = ("import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
            "from nova_queue.cli import main; main()")  # SIGINT as in a terminal
    argv = [sys.executable, "-c", code, "gateway", "--bind", f"127.0.0.1:{port}",
            "--server", server]
    for stop in (signal.SIGINT, signal.SIGTERM):
        headers = _serve_then_stop(argv, env, f"http://127.0.0.1:{port}", stop)
        closes = headers.get("Connection", "").lower() == "close"
        assert closes == (server == "werkzeug"), headers
