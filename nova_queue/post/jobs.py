"""Post-processing of finished jobs through RQ: artifacts, then an optional webhook.

The flow, and why no finished job is lost:

1. The Lua scripts that finish a job in state ``done`` add it to the namespace's
   ``finished`` outbox (``nova:{ns}:finished``) in the same atomic step.
2. :func:`dispatch` turns an outbox entry into an RQ job on :func:`queue_name` with a
   deterministic id (:func:`build_job_id`), enqueued with RQ's ``unique=True``: while that
   RQ job exists (queued, running, or failed and kept for :data:`BUILD_FAILURE_TTL_S`), a
   second dispatch is a no-op. The committing worker dispatches at once
   (:func:`dispatch_finished`); the post-worker sweeps the outbox every few seconds, which
   covers jobs finished by the reap and fail paths and any dispatch that failed.
3. :func:`build_job` (the RQ job) builds the artifacts (:mod:`nova_queue.post_artifacts`),
   queues the webhook as a separate RQ job with ``Retry`` (so a retried webhook never
   rebuilds anything), and only then removes the outbox entry — if its score (the finish
   time) is unchanged, so a job that was retried and finished again stays in the outbox.
   A successful build job is deleted (``result_ttl=0``) so a later finish can dispatch again.

Queues: ``nova-post`` for namespace ``default``, ``nova-post:<ns>`` for any other, so the
post-worker of one namespace never runs another's jobs. RQ job arguments carry only the
namespace and job id: Redis, store and webhook URLs (secrets) come from the settings of the
process that runs the job — those the post-worker registered (:func:`register_context`), else
:meth:`Settings.from_env`. RQ needs raw bytes, so it gets its own ``decode_responses=False``
connection.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import logging
import threading
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import redis
from rq import Queue, Retry
from rq.job import Job, get_current_job

from nova_queue import __version__
from nova_queue.client import NovaClient
from nova_queue.connection import connect
from nova_queue.errors import ConfigError, NovaError
from nova_queue.post_artifacts import ArtifactKeys, build_artifacts
from nova_queue.settings import Settings
from nova_queue.stores import ResultStore, open_store

log = logging.getLogger(__name__)

POST_QUEUE = "nova-post"
#: Outbox entries dispatched per sweep.
OUTBOX_BATCH = 1000
#: Longest time one artifact build may take before RQ stops it.
BUILD_TIMEOUT_S = 3600
#: Retries of a failed build (seconds between them); then RQ keeps it as failed for
#: BUILD_FAILURE_TTL_S, during which dispatching it again is a no-op — the backoff.
BUILD_RETRY_INTERVALS_S = (5, 30)
BUILD_FAILURE_TTL_S = 600
#: Webhook: 3 retries after the first try, this many seconds apart.
WEBHOOK_RETRY_INTERVALS_S = (2, 10, 60)
WEBHOOK_TIMEOUT_S = 10.0
#: A sent webhook's RQ job is kept this long, so a rebuild does not send it twice.
WEBHOOK_RESULT_TTL_S = 86400
WEBHOOK_FAILURE_TTL_S = 7 * 86400

# RQ >= 3 enqueues a job id only if it is absent, atomically (one Lua script).
_HAS_UNIQUE = "unique" in inspect.signature(Queue.enqueue_call).parameters


def queue_name(namespace: str) -> str:
    """The RQ queue of a namespace: ``nova-post``, or ``nova-post:<ns>``."""
    return POST_QUEUE if namespace == "default" else f"{POST_QUEUE}:{namespace}"


def _ns_tag(namespace: str) -> str:
    # RQ job ids allow only [A-Za-z0-9_-]; a fixed-length hash keeps "<tag>-<job>" unambiguous
    return hashlib.sha256(namespace.encode("utf-8")).hexdigest()[:12]


def build_job_id(namespace: str, job_id: str) -> str:
    """RQ job id of a job's artifact build (one per namespace and job)."""
    return f"nova-post-{_ns_tag(namespace)}-{job_id}"


def webhook_job_id(namespace: str, job_id: str, finished_ms: int) -> str:
    """RQ job id of the webhook for one finish of a job."""
    return f"nova-hook-{_ns_tag(namespace)}-{job_id}-{finished_ms}"


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
        if self._store is None:
            self._store = open_store(self.settings.resolved_store_url,
                                     public_endpoint=self.settings.s3_public_endpoint)
        return self._store


_contexts: dict[str, PostContext] = {}
_rq_connections: dict[str, redis.Redis] = {}
_lock = threading.Lock()


def rq_connection(redis_url: str) -> redis.Redis:
    """A shared ``decode_responses=False`` client for RQ (one per URL per process)."""
    with _lock:
        conn = _rq_connections.get(redis_url)
        if conn is None:
            conn = _rq_connections[redis_url] = connect(redis_url, decode_responses=False)
        return conn


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


# ---- dispatch ---------------------------------------------------------------------------

def _enqueue_once(queue: Queue, func: str, args: tuple[Any, ...], rq_job_id: str,
                  **options: Any) -> bool:
    if _HAS_UNIQUE:
        from rq.exceptions import DuplicateJobError

        try:
            queue.enqueue_call(func, args=args, job_id=rq_job_id, unique=True, **options)
        except DuplicateJobError:
            return False
        return True
    # older RQ: check, then enqueue; a lost race runs the job twice, which is harmless
    if Job.exists(rq_job_id, connection=queue.connection):
        return False
    queue.enqueue_call(func, args=args, job_id=rq_job_id, **options)
    return True


def dispatch(client: NovaClient, job_id: str, rq_conn: redis.Redis | None = None) -> bool:
    """Queue the artifact build of a job in the outbox; False if not there or already queued."""
    if client.redis.zscore(client.keys.finished(), job_id) is None:
        return False
    ns = client.settings.namespace
    queue = Queue(queue_name(ns), connection=rq_conn or rq_connection(client.settings.redis_url))
    queued = _enqueue_once(
        queue, "nova_queue.post.build_job", (ns, job_id), build_job_id(ns, job_id),
        timeout=BUILD_TIMEOUT_S, result_ttl=0, failure_ttl=BUILD_FAILURE_TTL_S,
        retry=Retry(max=len(BUILD_RETRY_INTERVALS_S), interval=list(BUILD_RETRY_INTERVALS_S)),
        description=f"nova-queue artifacts of job {job_id} ({ns})")
    if queued:
        log.info("queued post-processing of job %s on %s", job_id, queue.name)
    return queued


def dispatch_finished(client: NovaClient, job_id: str) -> bool:
    """Worker hook after a commit that finished a job: dispatch now; never raises."""
    try:
        return dispatch(client, job_id)
    except Exception as exc:  # noqa: BLE001 - the sweep retries; the worker must go on
        log.warning("could not queue post-processing of job %s (%s); the post-worker's "
                    "sweep will", job_id, exc)
        return False


def dispatch_outbox(client: NovaClient, rq_conn: redis.Redis | None = None,
                    limit: int = OUTBOX_BATCH) -> int:
    """Dispatch the oldest ``limit`` outbox entries; returns how many were newly queued."""
    ids = client.redis.zrange(client.keys.finished(), 0, limit - 1)
    return sum(dispatch(client, job_id, rq_conn) for job_id in ids)


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
    if state != "done":
        # retry takes a job out of the outbox atomically, so this is stray data: drop it
        log.warning("job %s is %s, not done; dropping its outbox entry", job_id, state)
        _ack(client, job_id, score)
        return {"job_id": job_id, "skipped": f"job is {state}"}
    keys = build_artifacts(client, ctx.store, job_id)
    webhook = False
    if ctx.settings.webhook_url:
        current = get_current_job()
        conn = current.connection if current is not None else ctx.rq
        webhook = _enqueue_once(
            Queue(queue_name(namespace), connection=conn), "nova_queue.post.webhook_job",
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
