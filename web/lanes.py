"""The job timeline's view model: ``nova_queue.timeline.job_timeline`` with each bar placed
(percent of the job's span), coloured by its attempt's outcome and labelled."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nova_queue.web.text import backend_label, fmt_seconds

#: How each attempt outcome is drawn (CSS class suffix) in the job timeline.
OUTCOME_CLASSES = {"running": "running", "committed": "committed", "lost": "lost",
                   "timed out": "timeout", "failed": "failed", "handed back": "released",
                   "cancelled": "cancelled", "backup won": "backup-won",
                   "backup lost": "backup-lost", "superseded": "superseded",
                   "held": "held", "verified": "verified", "agreed": "committed",
                   "mismatch": "mismatch", "unverified": "committed",
                   "invalidated": "mismatch"}


def timeline_view(tl: Mapping[str, Any]) -> dict[str, Any]:
    """``nova_queue.timeline.job_timeline`` plus each bar's place (percent of the job's
    span), class and label: one lane per worker, one bar per attempt."""
    t0 = tl["t0_ms"]
    starts = [a["start_ms"] for lane in tl["lanes"] for a in lane["attempts"]]
    t0 = min([t0, *starts])
    t1 = max(tl["finished_ms"] or tl["now_ms"], t0 + 1)
    span = t1 - t0
    lanes = []
    for lane in tl["lanes"]:
        bars = []
        for a in lane["attempts"]:
            end = a["end_ms"] if a["end_ms"] is not None else t1
            outcome = a["outcome"] + (" (late result rejected)" if a["stale"] else "")
            kind = " · backup" if a["backup"] else " · verification" if a.get("verify") else ""
            label = (f"task {a['task']} · gen {a['lease_gen']}{kind}"
                     f" · {fmt_seconds((end - a['start_ms']) / 1000)} · {outcome}"
                     + (f": {a['error']}" if a["error"] else ""))
            bars.append({**a, "left_pct": round(100 * (a["start_ms"] - t0) / span, 3),
                         "width_pct": round(max(100 * (end - a["start_ms"]) / span, 0.4), 3),
                         "css": OUTCOME_CLASSES.get(a["outcome"], "lost")
                         + (" stale" if a["stale"] else "") + (" backup" if a["backup"] else ""),
                         "label": label})
        lanes.append({**lane, "bars": bars,
                      "title": lane["name"] + (f" ({backend_label(lane['backend'])})"
                                               if lane["backend"] else "")
                      + (" · quarantined" if lane["quarantined"] else "")})
    return {**tl, "lanes": lanes, "span_text": fmt_seconds(span / 1000),
            "note": "" if tl["complete"] else "the event stream was trimmed: the first "
                                               "attempts of this job are not shown"}
