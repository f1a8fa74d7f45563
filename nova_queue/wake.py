"""Waiting for work: sleep up to a claim's hint, but wake as soon as a job is enqueued or a
task requeued (the event stream says so, ``XREAD BLOCK``). The direct worker
(``nova_queue.workers.runtime``) and the gateway's long-polled claim (``web/gateway``)
both wait this way."""

from __future__ import annotations

import threading
import time

import redis

#: Events that can give a waiting worker something to claim.
WAKE_EVENTS = frozenset({"enqueued", "requeued"})
#: While other workers' events stream by, look for a wake event at most this often.
WAKE_POLL_S = 0.05


def event_mark(client) -> str | None:
    """The event stream's newest id (``client``: a NovaClient); None if it cannot be read
    (e.g. an ACL without XREVRANGE): the wait then simply sleeps."""
    try:
        return client.last_event_id()
    except redis.ResponseError:
        return None


def wait_for_work(client, after: str | None, wait_s: float,
                  stop: threading.Event | None = None) -> bool:
    """Wait up to ``wait_s`` for a wake event after id ``after`` (None: after the newest
    one); True when one came. A stop ends the wait; with Redis unreachable it sleeps."""
    stop = stop or threading.Event()
    deadline = time.monotonic() + wait_s
    try:
        if after is None:
            after = client.last_event_id()
        while not stop.is_set():
            left_ms = int((deadline - time.monotonic()) * 1000)
            if left_ms <= 0:
                return False
            events = client.events(after, count=100, block_ms=left_ms)
            if any(e.type in WAKE_EVENTS for e in events):
                return True
            if events:  # other workers' claims and commits: look again a little later
                after = events[-1].id
                stop.wait(min(WAKE_POLL_S, max(0.0, deadline - time.monotonic())))
    except redis.RedisError:
        stop.wait(max(0.0, deadline - time.monotonic()))
    return False
