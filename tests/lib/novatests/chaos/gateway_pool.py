"""Gateways and gateway workers of one chaos scenario (the ``pool`` fixture of
``tests/chaos/conftest.py``): real ``nova-queue gateway`` and ``worker --gateway`` processes
with the chaos lease settings, and the history checker's verdict on a job."""

from __future__ import annotations

from pathlib import Path

from nova_queue import tokens
from nova_queue.stores import open_store
from novatests.chaos.fleet import CHAOS_ENV
from novatests.chaos.history import check, invariants
from novatests.gateway import GatewayProc, HandWorker, gateway_worker


class GatewayPool:
    """Gateways and gateway workers of one scenario; all stopped at teardown."""

    def __init__(self, nova, redis_url: str, namespace: str, root: Path):
        self.nova, self.redis_url, self.namespace, self.root = nova, redis_url, namespace, root
        self.store_url = (root / "store").as_uri()
        self.gateways: list[GatewayProc] = []
        self.workers = []
        self.hands: list[HandWorker] = []

    def gateway(self, name: str = "gw") -> GatewayProc:
        gw = GatewayProc(self.redis_url, self.namespace, self.store_url, self.root / name,
                         env=CHAOS_ENV, name=name)
        self.gateways.append(gw)
        return gw

    def worker(self, gw: GatewayProc, name: str, *args: str):
        token = tokens.create(self.nova, name)
        w = gateway_worker(gw.url, token, self.namespace, self.root / name, "--app",
                           "synthetic", "--no-benchmark", *args, name=name)
        self.workers.append(w)
        return w

    def hand(self, gw: GatewayProc, name: str) -> HandWorker:
        """A hand-written client of ``gw`` with a token of its own (not yet said hello)."""
        h = HandWorker(gw.url, tokens.create(self.nova, name))
        self.hands.append(h)
        return h

    def logs(self) -> str:
        return "\n".join(f"===== {p.log_path.name}\n{p.output()[-3000:]}"
                         for p in [*self.workers, *self.gateways])

    def verdict(self, job: str, expect: str = "done"):
        assert not invariants(self.nova, [job])
        return check(self.nova, [job], store=open_store(self.store_url), expect=expect)

    def close(self) -> None:
        for p in [*self.workers, *self.gateways]:
            p.close()
        for h in self.hands:
            h.close()
