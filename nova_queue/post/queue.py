"""The RQ side of post-processing: queue names, deterministic RQ job ids, and dispatching a
finished job's artifact build. Only the post-worker calls these (workers never touch RQ).

Queues: ``nova-post`` for namespace ``default``, ``nova-post:<ns>`` for any other, so the
post-worker of one namespace never runs another's jobs. RQ job arguments carry only the
namespace and job id: Redis, store and webhook URLs (secrets) come from the settings of the
process that runs the job. RQ needs raw bytes, so it gets its own ``decode_responses=False``
connection, one per Redis URL and process (:func:`rq_connection`).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from typing import Any

import redis
from rq import Queue, Retry
from rq.exceptions import DuplicateJobError

from nova_queue.client import NovaClient
from nova_queue.connection import connect

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
#: The RQ job function of an artifact build.
BUILD_FUNC = "nova_queue.post.jobs.build_job"

_rq_connections: dict[str, redis.Redis] = {}
_lock = threading.Lock()


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


def rq_connection(redis_url: str) -> redis.Redis:
    """A shared ``decode_responses=False`` client for RQ (one per URL per process)."""
    with _lock:
        conn = _rq_connections.get(redis_url)
        if conn is None:
            conn = _rq_connections[redis_url] = connect(redis_url, decode_responses=False)
        return conn


def enqueue_once(queue: Queue, func: str, args: tuple[Any, ...], rq_job_id: str,
                 **options: Any) -> bool:
    """Enqueue ``func(*args)`` as RQ job ``rq_job_id`` unless that job exists (RQ's atomic
    ``unique=True``); returns whether it was queued."""
    try:
        queue.enqueue_call(func, args=args, job_id=rq_job_id, unique=True, **options)
    except DuplicateJobError:
        return False
    return True


def dispatch(client: NovaClient, job_id: str, rq_conn: redis.Redis | None = None) -> bool:
    """Queue the artifact build of a job in the outbox; False if not there or already queued."""
    if client.redis.zscore(client.keys.finished(), job_id) is None:
        return False
    ns = client.settings.namespace
    queue = Queue(queue_name(ns), connection=rq_conn or rq_connection(client.settings.redis_url))
    queued = enqueue_once(
        queue, BUILD_FUNC, (ns, job_id), build_job_id(ns, job_id),
        timeout=BUILD_TIMEOUT_S, result_ttl=0, failure_ttl=BUILD_FAILURE_TTL_S,
        retry=Retry(max=len(BUILD_RETRY_INTERVALS_S), interval=list(BUILD_RETRY_INTERVALS_S)),
        description=f"nova-queue artifacts of job {job_id} ({ns})")
    if queued:
        log.info("queued post-processing of job %s on %s", job_id, queue.name)
    return queued


def dispatch_outbox(client: NovaClient, rq_conn: redis.Redis | None = None,
                    limit: int = OUTBOX_BATCH) -> int:
    """Dispatch the oldest ``limit`` outbox entries; returns how many were newly queued."""
    ids = client.redis.zrange(client.keys.finished(), 0, limit - 1)
    return sum(dispatch(client, job_id, rq_conn) for job_id in ids)
