"""Who is loading a job's model right now, and for how long: what ``enqueue --wait`` and
the demo show while a model loads ("loading model on w1 (12 s)") instead of silence.

A worker that starts loading a model records it (``loading-4.lua``: ``loading:<app>`` on
its hash, the Redis time it started); ``loaded-4.lua`` removes it when the load is done.
A load that failed leaves it behind, so a worker counts as loading only while it is live,
busy (a failed task makes it idle) and still holds the job's model as ``warm:<app>``.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Loading:
    """A live worker loading a model: its display name and the seconds since it started."""

    name: str
    seconds: float


def loading_workers(client, app: str, model: str) -> list[Loading]:
    """The live workers of ``app`` loading ``model`` now, longest first ([] without a model)."""
    if not model:
        return []
    live = client.eligible_workers(app)  # live workers serving it
    if not live:
        return []
    pipe = client.redis.pipeline(transaction=False)
    for wid in live:
        pipe.hmget(client.keys.worker(wid), f"loading:{app}", f"warm:{app}", "state", "name")
    now_ms = client.server_time_ms()
    found = []
    for wid, (since, warm, state, name) in zip(live, pipe.execute()):
        try:
            since_ms = int(since)
        except (TypeError, ValueError):
            continue
        if warm == model and state == "busy":
            found.append(Loading(name or wid, max(0.0, (now_ms - since_ms) / 1000)))
    return sorted(found, key=lambda x: -x.seconds)


def loading_note(client, app: str, model: str) -> str:
    """``loading model on w1 (12 s)`` (and how many more), or '' when no worker is loading
    ``model``. The name is a worker's own text: a terminal shows it through ``visible``."""
    found = loading_workers(client, app, model)
    if not found:
        return ""
    first = found[0]
    more = f" and {len(found) - 1} more" if len(found) > 1 else ""
    return f"loading model on {first.name}{more} ({first.seconds:.0f} s)"
