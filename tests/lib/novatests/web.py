"""Helpers of the web tests: a stand-in worker that drives real state through NovaClient
with real synthetic PNGs, CSRF tokens, and an audit of markup a browser would run."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from nova_queue import NovaClient
from nova_queue.apps import AppContext, TaskInput, load_app
from nova_queue.models import Lease
from nova_queue.stores import ResultStore, result_key
from nova_queue.workers.apps import load_worker_app

WEB_TOKEN = "test-web-token-123"
#: Debian's Chromium, which the browser tests drive (Playwright cannot download browsers
#: here), and the flags it runs with.
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
XSS = "<script>alert(1)</script><img src=x onerror=alert(2)>"
XSS_ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;"


def csrf_of(client) -> str:
    """The CSRF token of the test client's session (a GET creates it)."""
    client.get("/")
    with client.session_transaction() as sess:
        return sess["csrf"]


def unlocked_cookie(base: str, host: str | None = None) -> str:
    """A ``Cookie`` header of a session unlocked with :data:`WEB_TOKEN` on the gallery
    served at ``base`` (its unlock form, as a browser sends it; ``host``: the ``Host`` to
    send): a gallery with a web token opens live sockets only for such a session."""
    import re

    import requests

    headers = {"Host": host} if host else {}
    with requests.Session() as http:
        page = http.get(base + "/", headers=headers, timeout=10).text
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', page)
        assert csrf, "no CSRF token on the page"
        res = http.post(base + "/auth", data={"csrf_token": csrf.group(1), "token": WEB_TOKEN,
                                              "next": "/"}, headers=headers,
                        allow_redirects=False, timeout=10)
        assert res.status_code == 303, res.text
        return f"session={http.cookies['session']}"


def enqueue(nova: NovaClient, prompts: list[str], **kw: Any) -> str:
    """A synthetic job of ``prompts``."""
    app = load_app("synthetic")
    params = app.parse_params({"seconds": 0.0, "size": 64, **kw.pop("params", {})})
    return nova.enqueue("synthetic", app.make_tasks(prompts, params), params=params, **kw)


class StandInWorker:
    """Claims, runs the synthetic app for real, stores the PNG and commits — in-process."""

    def __init__(self, nova: NovaClient, store: ResultStore, wid: str, *, name: str = "",
                 backend: str = "cpu", host: str = "testhost", host_id: str = "hostid-1",
                 apps: tuple[str, ...] = ("synthetic",), trust: str = "trusted",
                 price: float = 0.0):
        self.nova, self.store, self.wid = nova, store, wid
        self.name = name or wid
        self.backend = backend
        self.app = load_worker_app("synthetic")
        self.app.runner.setup(AppContext(backend=backend, device="cpu",
                                         device_name="test device", worker_id=wid,
                                         worker_name=self.name))
        nova.register_worker(wid, {"name": self.name, "backend": backend, "host": host,
                                   "host_id": host_id, "device": f"{backend} test device",
                                   "trust": trust, "price": price}, apps)

    def claim(self, k: int = 1) -> list[Lease]:
        """Lease up to ``k`` tasks (empty when there is nothing to do)."""
        return self.nova.claim(self.wid, "synthetic", k).leases

    def finish(self, lease: Lease, *, warm: bool = True, meta: dict[str, str] | None = None,
               run_s: float = 0.05, inline: bool = False) -> str:
        """Run the task, put its PNG in the store (``inline``: carry it in the commit, held in
        Redis), commit it; returns the result key."""
        params = self.app.spec.parse_params(lease.params)
        [out] = self.app.runner.run_batch([TaskInput(
            task_id=lease.task_id, job_id=lease.job_id, index=lease.index, input=lease.input,
            cost=lease.cost, params=params, attempt=lease.attempt, lease_gen=lease.lease_gen,
            attempt_id=lease.attempt_id)])
        key = result_key(lease.job_id, lease.index, lease.lease_gen, lease.attempt_id,
                         out.extension)
        if not inline:
            self.store.put(key, out.data, out.content_type, {"job": lease.job_id,
                                                            "backend": self.backend})
        provenance = {"backend": self.backend, "worker": self.name,
                      "content_type": out.content_type, **(meta or {})}
        self.nova.complete(self.wid, lease, key, run_s=run_s, warm=warm, meta=provenance,
                           inline=out.data if inline else b"")
        return key

    def run_all(self, limit: int = 1000) -> int:
        """Claim and finish until nothing is left; returns how many were done."""
        done = 0
        while done < limit:
            leases = self.claim()
            if not leases:
                return done
            for lease in leases:
                self.finish(lease, warm=done > 0)
                done += 1
        return done


class _MarkupAudit(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        names = {name for name, _ in attrs}
        if tag == "script" and "src" not in names:
            self.problems.append("inline <script>")
        for name, value in attrs:
            if name.startswith("on"):
                self.problems.append(f"<{tag} {name}=...> event handler")
            if name in ("src", "href") and value and value.strip().lower().startswith(
                    ("javascript:", "data:text")):
                self.problems.append(f"<{tag} {name}={value!r}>")
        if tag == "img" and dict(attrs).get("src") == "x":
            self.problems.append("injected <img src=x>")


def unsafe_markup(html: str) -> list[str]:
    """Elements a browser would run: inline scripts, on* handlers, javascript: URLs."""
    audit = _MarkupAudit()
    audit.feed(html)
    audit.close()
    return audit.problems
