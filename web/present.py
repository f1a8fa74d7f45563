"""View models: what pages and live messages show, computed once in Python.

Templates render these dicts and ``static/*.js`` only places their text with
``textContent``, so formatting lives here and nowhere else.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from nova_queue.cannot_run import Blocked, CannotRun, blocked_text
from nova_queue.models import Event, JobStatus, TaskInfo
from nova_queue.stores import own_result_ext
from nova_queue.terms import money_text
from nova_queue.web.text import BACKEND_LABELS, backend_label, fmt_age, fmt_bytes, fmt_seconds
from nova_queue.worker_info import WorkerInfo

#: Results with these extensions are shown as images in the gallery.
IMAGE_EXTENSIONS = frozenset({"png", "jpg", "jpeg", "webp", "gif", "avif"})

UrlFor = Callable[[str], str]


def eta_s(job: JobStatus, now_ms: int) -> float | None:
    """Seconds until a job is done, from its observed throughput.

    ``ETA = remaining / throughput`` where ``remaining = pending + leased + verifying``
    (tasks not yet terminal) and ``throughput = done / elapsed_s`` with ``elapsed_s = (now_ms -
    started_ms) / 1000`` on the Redis clock. Unknown (None) until a task is done or while
    the job has not started; 0 once nothing remains.
    """
    remaining = job.pending + job.leased + job.verifying
    if remaining == 0:
        return 0.0
    if not job.started_ms or job.done == 0:
        return None
    elapsed_s = max(now_ms - job.started_ms, 1) / 1000
    return remaining / (job.done / elapsed_s)


def job_tone(job: JobStatus) -> str:
    """How the job's badge and progress bar are coloured: its state, but ``partial`` for a
    job done with failed tasks (amber, not a green success)."""
    return "partial" if job.state == "done" and job.failed else job.state


def job_state_text(job: JobStatus) -> str:
    """The job's badge: its state, with the failed count once it is done
    (``done · 3 failed``)."""
    return f"done · {job.failed} failed" if job_tone(job) == "partial" else job.state


def job_summary(job: JobStatus, now_ms: int) -> dict[str, Any]:
    """``JobStatus.to_json()`` without tasks, plus its badge, progress, elapsed time and ETA."""
    end_ms = job.finished_ms or now_ms
    elapsed = (end_ms - job.started_ms) / 1000 if job.started_ms else None
    eta = eta_s(job, now_ms)
    progress = job.terminal / job.total if job.total else 0.0
    return {
        **job.to_json(with_tasks=False),
        "tone": job_tone(job),
        "state_text": job_state_text(job),
        "progress": progress,
        "percent_text": f"{progress * 100:.0f} %",
        "counts_text": (f"{job.done}/{job.total} done · {job.leased} running · {job.pending} "
                        f"pending · {job.failed} failed · {job.cancelled} cancelled"
                        + (f" · {job.verifying} verifying" if job.verifying else "")),
        "elapsed_s": elapsed,
        "elapsed_text": fmt_seconds(elapsed),
        "eta_s": eta,
        "eta_text": job.state if job.finished else (fmt_seconds(eta) if eta is not None
                                                     else "–"),
        "title": job.name or job.job_id,
    }


def no_worker_text(app: str, live_apps: Mapping[str, int], unmet: str = "") -> str:
    """Why a job's tasks wait: no live worker serves its app (and what live ones serve), or
    none that does meets its requirements (``unmet`` says which)."""
    if unmet:
        return (f"No live worker of app '{app}' meets this job's requirements: {unmet}. Tasks "
                "wait until one joins (nova-queue worker --label key=value).")
    if live_apps:
        served = ", ".join(f"{a} ({n})" if n > 1 else a for a, n in sorted(live_apps.items()))
        others = f"live workers serve: {served}"
    else:
        others = "no worker is live right now"
    return (f"No live worker serves app '{app}' — {others}. Tasks wait until one joins "
            f"(nova-queue worker --app {app}).")


def waiting_text(blocked: Sequence[Blocked]) -> str:
    """Why a job waits when the live workers that may take it could not prepare it:
    ``waiting: no live worker can run this job — w1: No module named 'torch'``."""
    return "waiting: " + blocked_text(blocked)


def is_image_key(key: str) -> bool:
    """Whether a result key names an image by its extension."""
    return key.rpartition(".")[2].lower() in IMAGE_EXTENSIONS


def task_view(task: TaskInfo, result_url: UrlFor) -> dict[str, Any]:
    """``TaskInfo.to_json()`` plus the texts and URLs a gallery card shows."""
    # a result field any worker credential may HSET: shown only if it is the task's own key
    done = task.state == "done" and own_result_ext(task) is not None
    return {
        **task.to_json(),
        "backend_label": backend_label(task.backend) if task.backend else "",
        "backend_class": task.backend if task.backend in BACKEND_LABELS else "other",
        "result_url": result_url(task.result) if done else None,
        "image_url": result_url(task.result) if done and is_image_key(task.result) else None,
        "owner_text": _owner_text(task),
        "attempt_text": f"attempt {task.attempt_count}" if task.attempt_count else "",
        "gen_text": f"lease gen {task.lease_gen}" if task.lease_gen else "",
        "warm_text": "" if task.warm is None else ("warm" if task.warm else "cold"),
        "timing_text": _timing_text(task),
        "note": str(task.meta.get("note", "")) if isinstance(task.meta, dict) else "",
        "error_text": f"{task.error_kind}: {task.error}" if task.error else "",
        "backup_text": _backup_text(task),
        "verify_text": _verify_text(task),
    }


def _owner_text(task: TaskInfo) -> str:
    """Who has or had the task, by its state."""
    owner = task.worker_name or task.worker_id
    if task.state == "leased":
        where = f" on {task.host}" if task.host else ""
        return f"running on {owner} ({backend_label(task.backend)}{where})"
    if task.state == "pending":
        return ("waiting for a worker" if task.attempt_count == 0
                else f"requeued after attempt {task.attempt_count}")
    if task.state == "failed":
        return f"failed after {_count(task.attempt_count, 'attempt')}"
    if task.state == "cancelled":
        return "cancelled"
    if task.state == "verifying":
        return f"result from {owner} awaiting verification" if owner else "awaiting verification"
    return f"by {owner}" if owner else task.state


def _timing_text(task: TaskInfo) -> str:
    """Predicted and actual run time, as far as known."""
    parts = []
    if task.predicted_s is not None:
        parts.append(f"predicted {fmt_seconds(task.predicted_s)}")
    if task.run_s is not None:
        parts.append(f"actual {fmt_seconds(task.run_s)}")
    return " · ".join(parts)


def _verify_text(task: TaskInfo) -> str:
    """Where the result stands with verification: verified by whom, awaiting it, or being
    re-run to check it."""
    if task.state == "done" and task.verified_by:
        return f"verified by {task.verified_by_name or task.verified_by}"
    if task.state == "verifying":
        return "awaiting verification"
    if task.state == "leased" and task.candidates:
        return "re-run to verify"
    return ""


def _backup_text(task: TaskInfo) -> str:
    """A backup attempt's state: it won, or it runs (and where)."""
    if task.won_by_backup and task.state == "done":
        return "backup won"
    if task.backup and task.state == "leased":
        return f"backup on {task.backup['worker'] or task.backup['worker_id']}"
    return ""


Fields = Mapping[str, str]


def _task(f: Fields) -> str:
    return f"task {f.get('task', '?')}"


def _error(f: Fields) -> str:
    return f": {f['error']}" if f.get("error") else ""


def _claimed(f: Fields, who: str) -> str:
    pred = f.get("predicted_s")
    extra = f", predicted {fmt_seconds(float(pred))}" if pred else ""
    return (f"{_task(f)} claimed by {who} ({backend_label(f.get('backend', ''))}), "
            f"attempt {f.get('attempt')}, lease gen {f.get('lease_gen')}{extra}")


def _completed(f: Fields, who: str) -> str:
    warm = "warm" if f.get("warm") == "1" else "cold"
    return (f"{_task(f)} completed by {who} in {fmt_seconds(_float(f.get('run_s')))} ({warm}),"
            f" lease gen {f.get('lease_gen')}")


def _stale_rejected(f: Fields, who: str) -> str:
    return (f"stale {f.get('op', 'report')} of {_task(f)} from {who} rejected: lease gen "
            f"{f.get('lease_gen')}, current gen {f.get('current_gen') or '–'}, "
            f"task {f.get('state')}")


def _worker_joined(f: Fields, who: str) -> str:
    again = "rejoined" if f.get("rejoined") == "1" else "joined"
    return (f"worker {who} {again} ({backend_label(f.get('backend', ''))} on "
            f"{f.get('host') or '?'}), serving {f.get('apps') or 'nothing'}")


#: One line per event type of :data:`nova_queue.events.EVENT_TYPES` (``f``: the event's
#: fields, ``who``: its worker's name); tests/core/test_events.py checks that none is missing.
EVENT_TEXTS: dict[str, Callable[[Fields, str], str]] = {
    "enqueued": lambda f, who: (f"job {f.get('job')} enqueued: {f.get('total')} "
                                f"{f.get('app')} tasks"),
    "claimed": _claimed,
    "completed": _completed,
    "stale_rejected": _stale_rejected,
    "requeued": lambda f, who: (f"{_task(f)} requeued after {f.get('kind')} on {who} "
                                f"(attempt {f.get('attempt')}){_error(f)}"),
    "failed": lambda f, who: (f"{_task(f)} failed for good on {who} after attempt "
                              f"{f.get('attempt')}: {f.get('kind')}{_error(f)}"),
    "cancelled": lambda f, who: (f"{_task(f)} cancelled with its job; its lease on {who} "
                                 f"ended ({f.get('kind')})"),
    "retried": lambda f, who: f"{_task(f)} of job {f.get('job')} put back in the queue by hand",
    "job_finished": lambda f, who: (f"job {f.get('job')} finished ({f.get('state')}): "
                                    f"{f.get('done')} done, {f.get('failed')} failed, "
                                    f"{f.get('cancelled')} cancelled"),
    "job_cancelled": lambda f, who: f"job {f.get('job')} cancelled",
    "worker_joined": _worker_joined,
    "worker_left": lambda f, who: (f"worker {who} left; {f.get('released', 0)} leased tasks "
                                   "returned to the queue"),
    "worker_lost": lambda f, who: (f"worker {who} lost (heartbeat expired); "
                                   f"{f.get('released', 0)} tasks released"),
    "job_expired": lambda f, who: (f"job {f.get('job')} expired from Redis ({f.get('why')}): "
                                   f"{f.get('tasks')} tasks deleted"),
    "worker_forgotten": lambda f, who: f"worker {who} forgotten (gone for a retention)",
    "repaired": lambda f, who: f"doctor repaired {f.get('target')} ({f.get('op')}): {f.get('what')}",
    "grace": lambda f, who: (f"Redis was unreachable for {f.get('gap_ms')} ms: leases get one "
                             "renewal window"),
    "model_loading": lambda f, who: (f"worker {who} is loading {f.get('model')} for "
                                     f"{f.get('app')}"),
    "model_loaded": lambda f, who: (f"worker {who} loaded {f.get('model')} for "
                                    f"{f.get('app')} in {f.get('load_s')} s"),
    "backup_started": lambda f, who: (f"{_task(f)}: {who} started a backup attempt "
                                      f"(gen {f.get('lease_gen')}) beside the running one"),
    "backup_won": lambda f, who: (f"{_task(f)}: the backup attempt on {who} committed first; "
                                  f"the other attempt ran {f.get('loser_run_s')} s and lost"),
    "backup_lost": lambda f, who: (f"{_task(f)}: the first attempt on {who} committed before "
                                   "its backup; the backup lost"),
    "attempt_ended": lambda f, who: (f"{_task(f)}: one of its two attempts, on {who}, ended "
                                     f"({f.get('kind')}); the other runs on{_error(f)}"),
    "verifying": lambda f, who: (f"{_task(f)}: the result from {who} awaits verification"
                                 + (" by a trusted worker" if f.get("need") == "trusted" else "")),
    "verify_started": lambda f, who: (
        f"{_task(f)}: {who} checks {f.get('of')}'s result with its backup run"
        if f.get("free") == "1" else f"{_task(f)}: {who} re-runs it to check {f.get('of')}'s result"),
    "verified": lambda f, who: f"{_task(f)}: the result from {who} verified by {f.get('by')}",
    "mismatch": lambda f, who: (f"{_task(f)}: the result from {who} did not match "
                                f"{f.get('by')}'s; {f.get('reopened', 0)} of its unverified "
                                "results run again"),
    "invalidated": lambda f, who: (f"{_task(f)}: its result from {who} was withdrawn (its "
                                   "maker was caught); it runs again"),
    "unverified": lambda f, who: (f"{_task(f)}: no worker could verify the result from {who}; "
                                  + ("it stands unverified" if f.get("state") == "done"
                                     else "two results disagreed and no trusted worker "
                                          "was live: failed")),
    "trusted": lambda f, who: (f"worker {who} earned trust after {f.get('agreements')} "
                               "verified results in a row"),
    "deadline_behind": lambda f, who: (f"job {f.get('job')} falls behind its deadline: the "
                                       "live pool cannot finish it in time; it runs as fast "
                                       "as it can, dearer workers included"),
    "budget_held": lambda f, who: (f"job {f.get('job')} held back from {who}: its tasks "
                                   f"there would take its spend (${f.get('spent')}) past its "
                                   f"budget (${f.get('budget')}); it waits for cheaper "
                                   "capacity"),
    "worker_quarantined": lambda f, who: (f"worker {who} quarantined: {f.get('reason')}; "
                                          f"{f.get('refunded', 0)} tasks got their attempts "
                                          "back"),
    "worker_released": lambda f, who: (f"worker {who} let back after quarantine "
                                       f"({'its probe task committed' if f.get('by') == 'probe' else 'by an admin'})"),
}


def event_text(event: Event, names: Mapping[str, str]) -> str:
    """One line telling what happened, naming workers by their names."""
    f = event.fields
    wid = f.get("worker", "")
    who = f.get("name") or names.get(wid) or wid or "?"
    # the other workers an event names (a verifier, the maker of a checked result), by name
    f = {**f, **{k: names[f[k]] for k in ("by", "of") if f.get(k) in names}}
    text = EVENT_TEXTS.get(event.type)
    if text is not None:
        return text(f, who)
    rest = " ".join(f"{k}={v}" for k, v in sorted(f.items()))  # a type this version lacks
    return f"{event.type} {rest}".strip()


def event_view(event: Event, names: Mapping[str, str]) -> dict[str, Any]:
    """``Event.to_json()`` plus its one-line text, its time (UTC) and ``key``, unique per
    event (the events of one packed entry share its ``id``)."""
    when = datetime.datetime.fromtimestamp(event.ts_ms / 1000, datetime.timezone.utc)
    return {**event.to_json(), "key": f"{event.id}/{event.part}",
            "text": event_text(event, names),
            "time_text": when.strftime("%H:%M:%S"),
            "iso_time": when.isoformat(timespec="milliseconds")}


def worker_view(w: WorkerInfo, now_ms: int) -> dict[str, Any]:
    """``WorkerInfo.to_json()`` plus display texts."""
    speeds = []
    for app, s in w.speeds.items():
        speeds.append({
            "app": app, "benchmark_text": fmt_seconds(s.get("bench_s")),
            "ema_text": fmt_seconds(s.get("ema_s")), "compile_text": fmt_seconds(s.get("cold_s")),
            "load_text": fmt_seconds(s.get("load_s")), "samples": s.get("samples") or 0,
            "done": s.get("done") or 0,
        })
    memory = (f"{fmt_bytes(w.memory_free)} free of {fmt_bytes(w.memory_total)}"
              if w.memory_total else "–")
    return {
        **w.to_json(),
        "backend_label": backend_label(w.backend),
        "backend_class": w.backend if w.backend in BACKEND_LABELS else "other",
        "memory_text": memory,
        "heartbeat_text": fmt_age(w.last_seen_ms, now_ms),
        "speed_rows": speeds,
        "current_text": ", ".join(w.current) if w.current else "–",
        "labels_text": " ".join(f"{k}={v}" for k, v in sorted(w.labels.items())) or "–",
        "token_text": (f"{w.token} (owner {w.owner})" if w.owner and w.owner != w.token
                       else w.token or "– (direct)"),
        "warm_text": (", ".join(f"{app}: {m}" for app, m in sorted(w.warm.items()))
                      + f" ({w.model_loads} loads)") if w.warm else "–",
        "quarantine_text": (f"quarantined: {w.quarantine_reason}; probe "
                            f"{_probe_when(w.quarantine_until_ms, now_ms)}"
                            if w.quarantined else ""),
        "cannot_run_texts": [cannot_run_text(m, now_ms) for m in w.cannot_run],
        "trust_text": trust_text(w),
        "price_text": f"{money_text(w.cost_per_hour)} / hour" if w.cost_per_hour else "free ($0)",
    }


def trust_text(w: WorkerInfo) -> str:
    """``trusted (vouched)``; ``trusted (earned: 24 verified)``; ``new: 3 verified, 1 mismatch``
    (its results are re-run to check them)."""
    if w.trust == "trusted" and w.vouched:
        return "trusted (vouched)"
    record = f"{w.verified} verified, {w.mismatches} mismatch{'' if w.mismatches == 1 else 'es'}"
    return f"trusted (earned: {record})" if w.trust == "trusted" else f"new: {record}"


def cannot_run_text(m: CannotRun, now_ms: int) -> str:
    """``cannot run txt2img (model M): <reason> (marked 2 min 00 s ago; offered again in
    8 min 00 s or when it restarts)``."""
    what = f"{m.app} (model {m.model})" if m.model else m.app
    return (f"cannot run {what}: {m.reason} (marked {fmt_age(m.since_ms, now_ms)}; offered "
            f"again in {fmt_seconds(max(m.until_ms - now_ms, 0) / 1000)} or when it restarts)")


def _probe_when(until_ms: int | None, now_ms: int) -> str:
    if not until_ms or until_ms <= now_ms:
        return "at its next claim"
    return f"in {fmt_seconds((until_ms - now_ms) / 1000)}"


def host_groups(workers: Iterable[WorkerInfo], now_ms: int) -> list[dict[str, Any]]:
    """Workers grouped by host id (live hosts first), each group with its host name."""
    groups: dict[str, dict[str, Any]] = {}
    for w in workers:
        key = w.host_id or w.host or w.worker_id
        g = groups.setdefault(key, {"host_id": w.host_id, "host": w.host, "workers": [],
                                    "alive": 0})
        g["workers"].append(worker_view(w, now_ms))
        g["alive"] += int(w.alive)
    return sorted(groups.values(), key=lambda g: (g["alive"] == 0, g["host"], g["host_id"]))


def app_warnings(apps: Iterable[str], pending: Mapping[str, int],
                 workers: Iterable[WorkerInfo]) -> list[dict[str, Any]]:
    """Apps with pending tasks that no live worker serves."""
    served = {app for w in workers if w.alive for app in w.apps}
    return [{"app": app, "pending": pending[app],
             "text": f"{_count(pending[app], app + ' task')} pending but no live worker serves "
                     f"{app}: start one with `nova-queue worker --app {app}`"}
            for app in apps if pending.get(app, 0) > 0 and app not in served]


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _float(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None

