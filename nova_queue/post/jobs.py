"""The RQ job functions of post-processing, and the settings they run with.

:func:`build_job` builds a finished job's artifacts (:mod:`nova_queue.post.artifacts`),
queues the webhook as a separate RQ job with ``Retry`` (so a retried webhook never rebuilds
anything), and only then removes the outbox entry — if its score (the finish time) is
unchanged, so a job that was retried and finished again stays in the outbox. A successful
build job is deleted (``result_ttl=0``) so a later finish can dispatch again.
:func:`webhook_job` POSTs the job's summary to ``NOVA_WEBHOOK_URL``.

A failed job (not one task done) is post-processed as a done one is: its manifest lists each
task's error, its contact sheet shows the failed tiles, and its webhook says ``"state":
"failed"`` — whoever waits on the webhook learns that the job ended, and how. A cancelled job
is not (someone chose to stop it).

Jobs carry only the namespace and the job id; the settings (Redis, store and webhook URLs:
secrets) are those the post-worker registered (:func:`register_context`), else
:meth:`Settings.from_env`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import redis
from rq import Queue, Retry
from rq.job import get_current_job

from nova_queue import __version__
from nova_queue.client import NovaClient
from nova_queue.errors import ConfigError, NovaError
from nova_queue.post.artifacts import build_artifacts
from nova_queue.post.queue import enqueue_once, queue_name, rq_connection, webhook_job_id
from nova_queue.results import Results
from nova_queue.settings import Settings
from nova_queue.stores import ArtifactKeys, ResultStore, open_store

log = logging.getLogger(__name__)

#: Webhook: 3 retries after the first try, this many seconds apart.
WEBHOOK_RETRY_INTERVALS_S = (2, 10, 60)
WEBHOOK_TIMEOUT_S = 10.0
#: A sent webhook's RQ job is kept this long, so a rebuild does not send it twice.
WEBHOOK_RESULT_TTL_S = 86400
WEBHOOK_FAILURE_TTL_S = 7 * 86400
#: The RQ job function of a webhook.
WEBHOOK_FUNC = "nova_queue.post.jobs.webhook_job"
#: Finished states that are post-processed (the scripts put these jobs in the outbox).
POSTED_STATES = ("done", "failed")


# ---- per-process context ----------------------------------------------------------------

@dataclasses.dataclass
class PostContext:
    """What post-processing jobs use in this process: settings, clients, store."""

    settings: Settings
    client: NovaClient
    rq: redis.Redis
    _store: ResultStore | None = None

    @property
    def store(self) -> ResultStore:
        """The results, in Redis (small ones) or the store (nova_queue/results.py), opened on
        first use."""
        if self._store is None:
            self._store = Results(self.client.redis, self.client.keys,  # type: ignore[assignment]
                                  open_store(self.settings.resolved_store_url,
                                             public_endpoint=self.settings.s3_public_endpoint))
        return self._store


_contexts: dict[str, PostContext] = {}
_lock = threading.Lock()


def register_context(settings: Settings) -> PostContext:
    """Make this process run its namespace's post-processing jobs with ``settings``."""
    ctx = PostContext(settings, NovaClient.from_settings(settings),
                      rq_connection(settings.redis_url))
    with _lock:
        _contexts[settings.namespace] = ctx
    return ctx


def context_for(namespace: str) -> PostContext:
    """The registered context of ``namespace``, else one from the ``NOVA_*`` environment."""
    with _lock:
        ctx = _contexts.get(namespace)
    return ctx or register_context(Settings.from_env(namespace=namespace))


# ---- RQ jobs ----------------------------------------------------------------------------

def build_job(namespace: str, job_id: str) -> dict[str, Any]:
    """RQ job: build a finished job's artifacts, queue its webhook, clear its outbox entry."""
    ctx = context_for(namespace)
    client = ctx.client
    score = client.redis.zscore(client.keys.finished(), job_id)
    if score is None:
        log.info("job %s: not in the outbox (already processed); nothing to do", job_id)
        return {"job_id": job_id, "skipped": "not in the outbox"}
    state = client.redis.hget(client.keys.job(job_id), "state")
    if state not in POSTED_STATES:
        # retry takes a job out of the outbox atomically, so this is stray data: drop it
        log.warning("job %s is %s, not finished; dropping its outbox entry", job_id, state)
        _ack(client, job_id, score)
        return {"job_id": job_id, "skipped": f"job is {state}"}
    keys = build_artifacts(client, ctx.store, job_id)
    webhook = False
    if ctx.settings.webhook_url:
        current = get_current_job()
        conn = current.connection if current is not None else ctx.rq
        webhook = enqueue_once(
            Queue(queue_name(namespace), connection=conn), WEBHOOK_FUNC,
            (namespace, job_id, int(score)), webhook_job_id(namespace, job_id, int(score)),
            timeout=int(WEBHOOK_TIMEOUT_S * 3), result_ttl=WEBHOOK_RESULT_TTL_S,
            failure_ttl=WEBHOOK_FAILURE_TTL_S,
            retry=Retry(max=len(WEBHOOK_RETRY_INTERVALS_S),
                        interval=list(WEBHOOK_RETRY_INTERVALS_S)),
            description=f"nova-queue webhook for job {job_id} ({namespace})")
    _ack(client, job_id, score)
    return {"job_id": job_id, "artifacts": keys.to_json(), "webhook_queued": webhook}


def _ack(client: NovaClient, job_id: str, score: float) -> bool:
    """Remove the outbox entry if it still has ``score`` (compare-and-delete under WATCH)."""
    key = client.keys.finished()
    for _ in range(50):
        with client.redis.pipeline() as pipe:
            try:
                pipe.watch(key)
                if pipe.zscore(key, job_id) != score:
                    return False
                pipe.multi()
                pipe.zrem(key, job_id)
                pipe.execute()
                return True
            except redis.WatchError:
                continue  # another job finished meanwhile; try again
    log.warning("outbox of job %s kept changing; leaving the entry (a rebuild is harmless)",
                job_id)
    return False


def webhook_payload(client: NovaClient, job_id: str) -> dict[str, Any]:
    """The JSON summary POSTed to the webhook."""
    st = client.job(job_id, with_tasks=False)
    return {
        "event": "job.finished", "namespace": client.settings.namespace, "job_id": job_id,
        "name": st.name, "app": st.app, "state": st.state, "created_ms": st.created_ms,
        "finished_ms": st.finished_ms,
        "counts": {"total": st.total, "done": st.done, "failed": st.failed,
                   "cancelled": st.cancelled},
        "artifacts": ArtifactKeys.for_job(job_id).to_json(),
    }


def webhook_job(namespace: str, job_id: str, finished_ms: int) -> int:
    """RQ job: POST the job's summary to ``NOVA_WEBHOOK_URL``; raises on a non-2xx answer."""
    ctx = context_for(namespace)
    url = ctx.settings.webhook_url
    if not url:
        log.info("job %s: no webhook URL configured any more; not sent", job_id)
        return 0
    payload = webhook_payload(ctx.client, job_id)
    payload["finished_ms"] = payload["finished_ms"] or finished_ms
    return post_json(url, payload)


def post_json(url: str, payload: dict[str, Any], timeout_s: float = WEBHOOK_TIMEOUT_S) -> int:
    """POST ``payload`` as JSON; returns the 2xx status, raises NovaError otherwise."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError("NOVA_WEBHOOK_URL must be an http:// or https:// URL")
    shown = f"{parts.scheme}://{parts.hostname}"  # never log paths or queries: tokens live there
    req = urllib.request.Request(
        url, data=json.dumps(payload).encode("utf-8"), method="POST",
        headers={"Content-Type": "application/json",
                 "User-Agent": f"nova-queue/{__version__}"})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            status = int(resp.status)
    except urllib.error.HTTPError as exc:
        raise NovaError(f"webhook {shown} answered HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise NovaError(f"webhook {shown} unreachable: {reason}") from None
    if not 200 <= status < 300:
        raise NovaError(f"webhook {shown} answered HTTP {status}")
    log.info("webhook for job %s sent to %s: HTTP %d", payload.get("job_id"), shown, status)
    return status
