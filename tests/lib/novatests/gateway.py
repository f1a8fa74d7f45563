"""Gateways and gateway workers as real processes (``nova-queue gateway``, ``nova-queue
worker --gateway``) for the gateway tests, the chaos scenarios and the benchmark."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import requests

from nova_queue import protocol
from nova_queue.keys import result_key
from nova_queue.local import free_port, wait_for
from novatests.procs import WorkerProc

#: What a gateway worker is given instead of Redis and store credentials: nothing that
#: answers, so a test proves the worker never needs them.
NO_REDIS = "redis://127.0.0.1:9/0"
NO_STORE = "file:///nonexistent/nova-store"


class GatewayProc:
    """One ``nova-queue gateway`` subprocess on a free port; its log goes to a file."""

    def __init__(self, redis_url: str, namespace: str, store_url: str, folder: Path, *,
                 env: dict[str, str] | None = None, name: str = "gw", port: int = 0):
        folder.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = folder / f"{name}.log"
        self._env = {**os.environ, "NOVA_REDIS_URL": redis_url, "NOVA_NAMESPACE": namespace,
                     "NOVA_STORE_URL": store_url, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.log = open(self.log_path, "ab")  # noqa: SIM115 - open while the process runs
        self.proc: subprocess.Popen | None = None
        self.start()

    def start(self) -> GatewayProc:
        """(Re)start the process on the same port; returns once it answers."""
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "nova_queue", "--log-level", "INFO", "gateway", "--bind",
             f"127.0.0.1:{self.port}"], env=self._env, stdout=self.log, stderr=subprocess.STDOUT)
        wait_for(self._answers, timeout_s=60, interval_s=0.05,
                 message=f"the gateway on port {self.port}")
        return self

    def _answers(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"gateway exited {self.proc.returncode}: {self.output()}")
        try:
            return requests.post(self.url + "/v1/hello", timeout=2).status_code == 401
        except requests.RequestException:
            return False

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def output(self) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()


def gateway_worker(url: str, token: str, namespace: str, home: Path, *args: str,
                   env: dict[str, str] | None = None, name: str = "w") -> WorkerProc:
    """A ``nova-queue worker --gateway URL`` process; it is given no usable Redis or store."""
    return WorkerProc(NO_REDIS, namespace, NO_STORE, home, "--gateway", url, *args,
                      env={"NOVA_WORKER_TOKEN": token, **(env or {})}, name=name)


class DelayProxy:
    """``127.0.0.1:port`` -> ``127.0.0.1:target_port``, holding every chunk ``delay_s`` in
    each direction: a slow link (round trip >= 2 x ``delay_s``) in front of a gateway."""

    def __init__(self, target_port: int, delay_s: float):
        import socket
        import threading

        self.target_port, self.delay_s = target_port, delay_s
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._socks: list = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name="delay-accept").start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        import socket
        import threading

        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target_port))
            self._socks += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src, dst) -> None:
        import time

        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                time.sleep(self.delay_s)  # the fault: a slow link
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.close()
                except OSError:
                    pass

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        for s in self._socks:
            try:
                s.close()
            except OSError:
                pass


#: A worker's registry fields, for the calls made through Flask's test client.
FIELDS = {"name": "pc", "host": "pc", "labels": json.dumps({"backend": "cpu", "host": "pc"})}


def auth(token: str, worker: str = "") -> dict[str, str]:
    headers = {"Authorization": f"Bearer {token}"}
    if worker:
        headers["X-Nova-Worker"] = worker
    return headers


def join(gw, token: str, apps=("synthetic",), fields=None) -> str:
    """hello + register; the worker id the gateway gave."""
    res = gw.post("/v1/hello", json={"protocol": protocol.PROTOCOL}, headers=auth(token))
    assert res.status_code == 200, res.json
    wid = res.json["worker_id"]
    res = gw.post("/v1/register", json={"fields": fields or FIELDS, "apps": list(apps)},
                  headers=auth(token, wid))
    assert res.status_code == 200, res.json
    return wid


def claim(gw, token: str, app="synthetic", ids=("a1",), wait_ms=0):
    """A claim through the gateway's test client."""
    return gw.post("/v1/claim", json={"app": app, "attempt_ids": list(ids), "wait_ms": wait_ms},
                   headers=auth(token))


def commit(gw, token: str, lease: dict, data: bytes = b"png", key: str | None = None):
    """A multipart complete of ``lease`` carrying ``data``; (response, key)."""
    key = key or result_key(lease["job_id"], lease["index"], lease["lease_gen"],
                            lease["attempt_id"], "png")
    fence = {k: lease[k] for k in ("task_id", "app", "lease_gen", "attempt_id")}
    body = {"lease": fence, "key": key, "run_s": 0.1, "warm": True, "meta": {}}
    return gw.post("/v1/complete", headers=auth(token), data={
        "commit": json.dumps(body), "content_type": "image/png",
        "metadata": json.dumps({"app": "synthetic"}),
        "data": (io.BytesIO(data), "result")}), key


class HandWorker:
    """A hand-written gateway client, as an adversarial probe writes one: it speaks the
    protocol over HTTP (hello, register, claim, renew, fail) and says what it likes."""

    def __init__(self, url: str, token: str):
        self.url, self.token, self.worker_id = url, token, ""
        self.http = requests.Session()

    def post(self, call: str, body: dict) -> requests.Response:
        headers = {"Authorization": f"Bearer {self.token}"}
        if self.worker_id:
            headers["X-Nova-Worker"] = self.worker_id
        return self.http.post(f"{self.url}/v1/{call}", json=body, headers=headers, timeout=30)

    def hello(self, bench_s: float | None = None) -> str:
        """hello + register (a fresh worker id each time), declaring ``bench_s``."""
        self.worker_id = ""
        res = self.post("hello", {"protocol": protocol.PROTOCOL})
        assert res.status_code == 200, res.text
        self.worker_id = res.json()["worker_id"]
        bench = {"synthetic": {"bench_s": bench_s}} if bench_s is not None else {}
        res = self.post("register", {"fields": {"name": self.token[:6]}, "apps": ["synthetic"],
                                     "bench": bench})
        assert res.status_code == 200, res.text
        return self.worker_id

    def claim(self, k: int = 1) -> list[dict]:
        res = self.post("claim", {"app": "synthetic",
                                  "attempt_ids": [os.urandom(8).hex() for _ in range(k)]})
        assert res.status_code == 200, res.text
        return res.json().get("leases") or []

    def renew(self) -> None:
        self.post("renew", {"leases": []})

    def fail(self, lease: dict, kind: str, message: str) -> requests.Response:
        fence = {k: lease[k] for k in ("task_id", "app", "lease_gen", "attempt_id")}
        return self.post("fail", {"lease": fence, "kind": kind, "message": message})

    def close(self) -> None:
        self.http.close()


def fast_claim(gw, admin, token: str, wid: str, k: int) -> list[dict]:
    """``k`` leases of the synthetic app for ``wid`` through the gateway (its speed seeded
    as measured, so claims grant k)."""
    from novatests.seed import set_speed

    set_speed(admin, wid, "synthetic", 0.01)
    res = gw.post("/v1/claim", json={"app": "synthetic",
                                     "attempt_ids": [os.urandom(8).hex() for _ in range(k)]},
                  headers=auth(token, wid))
    assert res.status_code == 200 and len(res.json["leases"]) == k, res.json
    return res.json["leases"]
