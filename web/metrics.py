"""``/metrics`` for Prometheus: a collector that reads Redis at scrape time.

Names are prefixed ``novaqueue_`` and use base units (seconds, bytes). Labels are bounded:
``app``, ``state``, ``backend``, ``class`` (a live worker's backend/speed/price), and per
live worker ``worker`` (its id), ``name`` and ``backend``; job ids never become labels. Per-worker series cover live workers only, so
departed workers do not pile up. ``novaqueue_up`` is 0 when Redis cannot be read.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator
from typing import Any

import redis
from flask import Blueprint, Flask, Response, current_app
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from nova_queue.capacity import needed_by_class
from nova_queue.capacity import plan as capacity_plan
from nova_queue.client import NovaClient

log = logging.getLogger(__name__)

bp = Blueprint("metrics", __name__)

#: Jobs counted by ``novaqueue_jobs`` (the most recent ones).
JOBS_COUNTED = 1000


class NovaCollector:
    """Reads queue, job and worker state from Redis on every scrape."""

    def __init__(self, client: NovaClient):
        self.client = client

    def describe(self) -> list[Metric]:
        """Nothing up front: the registry must not scrape Redis at registration."""
        return []

    def collect(self) -> Iterator[Metric]:
        """Every metric, or only ``novaqueue_up 0`` when Redis fails."""
        try:
            metrics = list(self._collect())
        except redis.RedisError as exc:
            log.warning("metrics scrape failed: %s", exc)
            metrics = []
        up = GaugeMetricFamily("novaqueue_up", "1 if Redis could be read for this scrape.")
        up.add_metric([], 1 if metrics else 0)
        yield up
        yield from metrics

    def _collect(self) -> Iterator[Metric]:
        c, k = self.client, self.client.keys
        apps = c.apps()
        inflight = c.redis.hgetall(k.inflight())
        pipe = c.redis.pipeline(transaction=False)
        for app in apps:
            pipe.zcard(k.pending(app))
            pipe.scard(k.app_workers(app))
        pipe.zcard(k.failed())
        pipe.xlen(k.events())
        res = pipe.execute()
        pending = GaugeMetricFamily("novaqueue_tasks_pending", "Tasks waiting for a worker.",
                                    labels=["app"])
        leased = GaugeMetricFamily("novaqueue_tasks_leased", "Tasks leased by workers now.",
                                   labels=["app"])
        serving = GaugeMetricFamily("novaqueue_app_workers", "Live workers serving an app.",
                                    labels=["app"])
        for i, app in enumerate(apps):
            pending.add_metric([app], res[2 * i])
            leased.add_metric([app], max(0, int(inflight.get(app, 0))))
            serving.add_metric([app], res[2 * i + 1])
        yield from (pending, leased, serving)
        yield GaugeMetricFamily("novaqueue_tasks_failed",
                                "Tasks failed for good and not requeued.", value=res[-2])
        yield GaugeMetricFamily("novaqueue_events_stream_length",
                                "Entries in the event stream.", value=res[-1])
        by_state = Counter(j.state for j in c.jobs(JOBS_COUNTED) if j.state != "staging")
        jobs = GaugeMetricFamily("novaqueue_jobs",
                                 f"Jobs by state among the {JOBS_COUNTED} most recent.",
                                 labels=["state"])
        for state in ("queued", "running", "done", "failed", "cancelled"):
            jobs.add_metric([state], by_state.get(state, 0))
        yield jobs
        yield from self._deadlines()
        yield from self._workers()

    def _deadlines(self) -> Iterator[Metric]:
        """What autoscalers scale on (nova_queue/capacity.py): per app, the least slack of
        its jobs with a deadline (deadline minus the live pool's predicted finish; negative:
        late), and per observed class of worker (backend/speed/price) how many more of it
        the most demanding of those jobs needs."""
        slack = GaugeMetricFamily(
            "novaqueue_deadline_slack_seconds", "Least slack of an app's jobs with a deadline: "
            "deadline minus the predicted finish with the live pool (negative: late).",
            labels=["app"])
        needed = GaugeMetricFamily(
            "novaqueue_workers_needed", "More workers of a class (backend/speed/price) that "
            "would let the app's most demanding deadline job finish in time (0: none needed).",
            labels=["app", "class"])
        for app, p in capacity_plan(self.client)["apps"].items():
            slacks = [r["slack_s"] for r in p["jobs"] if r["slack_s"] is not None]
            if slacks:
                slack.add_metric([app], min(slacks))
            if p["jobs"]:
                for cls, n in sorted(needed_by_class(p).items()):
                    needed.add_metric([app, cls], n)
        yield from (slack, needed)

    def _workers(self) -> Iterator[Metric]:
        workers = self.client.workers()
        count = GaugeMetricFamily("novaqueue_workers", "Registered workers by backend and state.",
                                  labels=["backend", "state"])
        for (backend, state), n in sorted(Counter((w.backend, w.state) for w in workers).items()):
            count.add_metric([backend, state], n)
        yield count
        labels = ["worker", "name", "backend"]
        done = CounterMetricFamily("novaqueue_worker_tasks_done",
                                   "Tasks a live worker completed.", labels=labels)
        failures = CounterMetricFamily("novaqueue_worker_failures",
                                       "Failed runs of a live worker.", labels=labels)
        ooms = CounterMetricFamily("novaqueue_worker_oom", "Out-of-memory failures.",
                                   labels=labels)
        leased = GaugeMetricFamily("novaqueue_worker_leased_tasks", "Tasks a worker holds.",
                                   labels=labels)
        mem_total = GaugeMetricFamily("novaqueue_worker_memory_total_bytes",
                                      "Device memory of a worker.", labels=labels)
        mem_free = GaugeMetricFamily("novaqueue_worker_memory_free_bytes",
                                     "Free device memory when the worker last reported.",
                                     labels=labels)
        seen = GaugeMetricFamily("novaqueue_worker_last_seen_timestamp_seconds",
                                 "Last heartbeat (Unix time).", labels=labels)
        quarantined = GaugeMetricFamily("novaqueue_worker_quarantined",
                                        "1 while a live worker's claims are refused: its "
                                        "failed tasks succeed elsewhere.", labels=labels)
        app_labels = [*labels, "app"]
        ema = GaugeMetricFamily("novaqueue_worker_task_seconds",
                                "Moving average of warm runs, seconds per cost unit.",
                                labels=app_labels)
        bench = GaugeMetricFamily("novaqueue_worker_benchmark_seconds",
                                  "Startup benchmark, seconds per cost unit.", labels=app_labels)
        cold = GaugeMetricFamily("novaqueue_worker_compile_seconds",
                                 "First (cold) run: compile and warm-up seconds.",
                                 labels=app_labels)
        for w in workers:
            if not w.alive:
                continue
            lv = [w.worker_id, w.name, w.backend]
            done.add_metric(lv, w.tasks_done)
            failures.add_metric(lv, w.failures)
            ooms.add_metric(lv, w.oom)
            leased.add_metric(lv, len(w.current))
            quarantined.add_metric(lv, int(w.quarantined))
            if w.memory_total is not None:
                mem_total.add_metric(lv, w.memory_total)
            if w.memory_free is not None:
                mem_free.add_metric(lv, w.memory_free)
            if w.last_seen_ms:
                seen.add_metric(lv, w.last_seen_ms / 1000)
            for app, s in w.speeds.items():
                for family, field in ((ema, "ema_s"), (bench, "bench_s"), (cold, "cold_s")):
                    if s.get(field) is not None:
                        family.add_metric([*lv, app], s[field])
        yield from (done, failures, ooms, leased, mem_total, mem_free, seen, quarantined, ema, bench,
                    cold)


def init_app(app: Flask, client: NovaClient) -> None:
    """Give ``app`` its own registry holding the collector (not the global one)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(NovaCollector(client))  # type: ignore[arg-type]
    app.extensions["nova_metrics"] = registry


@bp.get("/metrics")
def metrics() -> Any:
    """The Prometheus text exposition."""
    registry = current_app.extensions["nova_metrics"]
    return Response(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
