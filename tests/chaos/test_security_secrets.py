"""Credentials never logged: a worker and the CLI at DEBUG level, with the password in the Redis
URL, through a job, a Redis outage, wrong passwords and malformed URLs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from novatests.chaos.fleet import CHAOS_ENV, Fleet, chaos_client, no_tracebacks

from nova_queue.local import wait_for

pytestmark = pytest.mark.slow

SECRET = "S3CRET-b7f1e2"


def cli(url: str, *args: str, stdin: str = "", flag: bool = True) -> subprocess.CompletedProcess:
    """``nova-queue --log-level DEBUG ...`` with the URL as a flag or in NOVA_REDIS_URL."""
    env = {**os.environ, **CHAOS_ENV}
    env.pop("NOVA_REDIS_URL", None)
    cmd = [sys.executable, "-m", "nova_queue", "--log-level", "DEBUG"]
    if flag:
        cmd += ["--redis", url]
    else:
        env["NOVA_REDIS_URL"] = url
    return subprocess.run(cmd + list(args), input=stdin, capture_output=True, text=True,
                          env=env, timeout=60, check=False)


def test_password_in_the_redis_url_is_never_logged(private_redis, namespace, tmp_path):
    # the user is in the server's config, so it survives the restart below
    server = private_redis("--appendonly", "yes", "--user", "nova", "on", f">{SECRET}", "~*",
                           "&*", "+@all")
    url = f"redis://nova:{SECRET}@127.0.0.1:{server.port}/0"
    outputs: list[str] = []

    def run(*args, **kw):
        res = cli(url if "url" not in kw else kw.pop("url"), "--namespace", namespace, *args,
                  **kw)
        outputs.append(res.stdout + res.stderr)
        return res

    enq = run("enqueue", "--app", "synthetic", "-p", "seconds=0.1", "-p", "size=64", "--json",
              "-", stdin="\n".join(f"secret {i}" for i in range(12)))
    assert enq.returncode == 0, enq.stderr
    job = enq.stdout.strip().split('"')[3]
    fleet = Fleet(url, namespace, (tmp_path / "store").as_uri(), tmp_path / "homes")
    nova = chaos_client(url, namespace)
    try:
        w = fleet.start("secretive", "--no-benchmark")
        wait_for(lambda: nova.job(job, with_tasks=False).done >= 3, timeout_s=60,
                 message="3 tasks done")
        server.stop(kill=True)  # connection errors get logged: with the URL redacted
        down = run("status", job)
        assert down.returncode == 1 and f"redis://nova:***@127.0.0.1:{server.port}/0" in down.stderr
        run("--debug", "status", job)  # a traceback on purpose
        wait_for(lambda: "Redis unavailable" in w.output() or "heartbeat failed" in w.output(),
                 timeout_s=30, message="the worker to log the outage")
        server.start()
        wait_for(lambda: nova.job(job, with_tasks=False).finished, timeout_s=60,
                 message="job to finish after the outage")
        assert run("status", job, flag=False).returncode == 0
        assert run("workers").returncode == 0
        wrong = run("status", job, url=url.replace(SECRET, SECRET + "-wrong"))
        assert wrong.returncode == 1 and "refused the credentials" in wrong.stderr
        bad = run("status", job, url=f"redis://nova:{SECRET}@127.0.0.1:notaport/0")
        assert bad.returncode == 1 and "invalid Redis URL" in bad.stderr
        w.signal(signal.SIGTERM)
        assert w.wait(30) == 0
        no_tracebacks([w])
        outputs.append(w.output())
    finally:
        fleet.close()
        nova.close()
    assert len(outputs) == 8 and all(outputs)
    assert any("Traceback" in o for o in outputs)  # the --debug run showed one
    leaks = [o for o in outputs if SECRET in o]
    assert not leaks, leaks[0][-3000:]
