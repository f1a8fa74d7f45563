"""Where a gateway task's milliseconds go: one commit path timed piece by piece, on a
private redis-server, with no worker runtime around it.

    PYTHONPATH=benchmarks python benchmarks/gateway_profile.py [--n 300] [--tmpfs]

Each mode commits ``n`` one-task no-op results one after another (complete and claim the
next, a 64-byte result) and prints the median ms per commit: ``direct`` (the file store's
``put`` and the script, as a direct worker), ``in_process`` (the worker's
:class:`~nova_queue.workers.link.GatewayLink` through Flask's test client: no HTTP),
``werkzeug`` and ``waitress`` (a real ``nova-queue gateway --server S`` process over HTTP,
the link's keep-alive session); and a Redis round trip, a token lookup and a rate count
alone. ``--tmpfs`` puts the stores on /dev/shm, where an fsync costs nothing, so the
gateway's own time is not buried under the disk's. The differences are the gateway's parts:
Flask, the auth script and the body's parsing (in_process − direct), then the HTTP server
and client (werkzeug or waitress − in_process).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

from nova_queue import NovaClient, Settings, TaskSpec, protocol, tokens
from nova_queue.keys import result_key
from nova_queue.local import RedisServer, free_port, wait_for
from nova_queue.stores import open_store
from nova_queue.workers.link import GatewayLink

FIELDS = {"name": "pc", "host": "pc", "labels": json.dumps({"backend": "cpu", "host": "pc"})}
DATA = b"x" * 64


def _ms(samples: list[float]) -> str:
    return f"{1000 * statistics.median(samples):.2f}"


def _loop(n: int, claim, commit) -> list[float]:
    """Claim one, then commit-and-claim-next ``n`` times; the seconds each commit took."""
    res, times = claim(), []
    for i in range(n):
        lease = res.leases[0]
        key = result_key(lease.job_id, lease.index, lease.lease_gen, lease.attempt_id, "bin")
        t0 = time.perf_counter()
        res = commit(lease, key, f"a{i + 1}")
        times.append(time.perf_counter() - t0)
        if res is None or not res.leases:
            break
    return times


def direct(settings: Settings, n: int) -> list[float]:
    client = NovaClient.from_settings(settings)
    store = open_store(settings.resolved_store_url)
    client.register_worker("direct", FIELDS, ["synthetic"], {})
    client.enqueue("synthetic", [TaskSpec(f"t{i}", 0.001) for i in range(n + 1)])

    def commit(lease, key, aid):
        store.put(key, DATA, "application/octet-stream", {"app": "synthetic"})
        return client.complete_and_claim("direct", lease, key, run_s=0.0, warm=True,
                                         app="synthetic", attempt_ids=[aid])[1]

    return _loop(n, lambda: client.claim("direct", "synthetic", 1, attempt_ids=["a0"]), commit)


def via_link(link: GatewayLink, admin: NovaClient, n: int) -> list[float]:
    link.hello(threading.Event())
    link.register_worker("", FIELDS, ["synthetic"], {})
    admin.enqueue("synthetic", [TaskSpec(f"t{i}", 0.001) for i in range(n + 1)])

    def commit(lease, key, aid):
        link.upload(key, DATA, "application/octet-stream", {"app": "synthetic"})
        return link.complete_and_claim("", lease, key, run_s=0.0, warm=True, app="synthetic",
                                       attempt_ids=[aid])[1]

    return _loop(n, lambda: link.claim("", "synthetic", 1, attempt_ids=["a0"]), commit)


class _Answer:
    """A test client's response as the link reads a requests one."""

    def __init__(self, resp):
        self.status_code, self.headers, self._body = resp.status_code, resp.headers, resp.data

    def json(self):
        return json.loads(self._body)


def in_process(settings: Settings, admin: NovaClient, n: int) -> tuple[list[float], dict]:
    """The commit through Flask's test client, and the gateway's Redis work alone."""
    from nova_queue.web.gateway import create_app
    from nova_queue.workers import link as link_mod

    app = create_app(settings=settings)
    client = app.test_client()
    token = tokens.create(admin, "inproc")

    class TestSession:  # GatewayLink over the test client (no HTTP)
        headers: dict[str, str] = {}  # noqa: RUF012 - what the link sets on a session

        def post(self, url, json=None, headers=None, timeout=None, verify=None, data=None,
                 files=None):
            if files:
                name, body, ctype = files["data"]
                data = {**(data or {}), "data": (io.BytesIO(body), name, ctype)}
            resp = client.post(url[len("http://x"):], json=json, data=data,
                               headers={**(headers or {}), "Authorization": f"Bearer {token}"})
            return _Answer(resp)

    link = link_mod.GatewayLink(Settings(gateway_url="http://x", worker_token=token))
    link.http.new_session = TestSession
    times = via_link(link, admin, n)
    r, keys = admin.redis, admin.keys
    parts = {"redis_ping": [], "token_lookup": [], "rate_window": []}
    for _ in range(200):
        t0 = time.perf_counter()
        r.ping()
        t1 = time.perf_counter()
        tokens.lookup(r, keys, token)
        t2 = time.perf_counter()
        pipe = r.pipeline(transaction=False)
        pipe.incr(keys.gateway_rate(tokens.digest(token), 1))
        pipe.expire(keys.gateway_rate(tokens.digest(token), 1), 120)
        pipe.execute()
        t3 = time.perf_counter()
        for k, v in zip(parts, (t1 - t0, t2 - t1, t3 - t2)):
            parts[k].append(v)
    app.extensions["nova_gateway"].close()
    return times, parts


def over_http(server: RedisServer, settings: Settings, admin: NovaClient, n: int,
              folder: Path, http_server: str) -> list[float]:
    port = free_port()
    env = {**os.environ, "NOVA_REDIS_URL": server.url, "NOVA_NAMESPACE": settings.namespace,
           "NOVA_STORE_URL": settings.store_url}
    log = open(folder / "gw.log", "ab")  # noqa: SIM115 - open while the gateway runs
    proc = subprocess.Popen([sys.executable, "-m", "nova_queue", "--log-level", "warning",
                             "gateway", "--bind", f"127.0.0.1:{port}", "--server", http_server], env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _answers(url), 60, 0.05, "the gateway")
        token = tokens.create(admin, "http")
        link = GatewayLink(Settings(gateway_url=url, worker_token=token))
        return via_link(link, admin, n)
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


def _answers(url: str) -> bool:
    try:
        return requests.post(url + "/v1/hello", timeout=2).status_code == 401
    except requests.RequestException:
        return False


def run_modes(server: RedisServer, folder: Path, modes: list[str], n: int
              ) -> dict[str, list[float]]:
    """Each mode in turn, in a fresh namespace: {mode or piece: seconds per call}."""
    print(f"protocol {protocol.PROTOCOL}; load average {os.getloadavg()}")
    out: dict[str, list[float]] = {}
    for i, mode in enumerate(modes):
        ns = f"prof-{mode}-{i}"
        settings = Settings(redis_url=server.url, namespace=ns,
                            store_url=(folder / f"store-{ns}").as_uri())
        admin = NovaClient.from_settings(settings)
        try:
            if mode == "direct":
                times = direct(settings, n)
            elif mode == "in_process":
                times, parts = in_process(settings, admin, n)
                out.update(parts)
            else:
                times = over_http(server, settings, admin, n, folder, mode)
        finally:
            admin.close()
        out.setdefault(mode, []).extend(times)
    print(f"load average {os.getloadavg()}")
    return out


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=300)
    p.add_argument("--tmpfs", action="store_true",
                   help="stores on /dev/shm (no fsync cost: the gateway's own time shows)")
    p.add_argument("--modes", default="direct,in_process,werkzeug,waitress,direct,werkzeug,"
                   "waitress")
    args = p.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="nova-gwprof-", dir="/dev/shm" if args.tmpfs
                                   else None))
    from benchlib import start_redis

    server = start_redis()
    try:
        out = run_modes(server, folder, args.modes.split(","), args.n)
    finally:
        server.close()
        shutil.rmtree(folder, ignore_errors=True)
    for k, v in out.items():
        print(f"{k:>14}: {_ms(v)} ms  (n={len(v)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
