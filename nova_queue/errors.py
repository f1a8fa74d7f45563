"""One exception hierarchy for every domain state, and the Lua status codes behind it.

Scripts return small integer codes (see each script's header); :func:`raise_for_code`
is the only place that turns them into exceptions. The codes and claim's wait hints are
defined here once: scripts name them ``CODE.<NAME>`` and ``WAIT_MS.<NAME>`` (``return {
CODE.WAIT, int(now), WAIT_MS.EMPTY }``) and ``nova_queue/scripts.py`` folds in the values of
:data:`CODES` and :data:`WAIT_MS` when it loads them.
"""

from __future__ import annotations

# Status codes shared by every script in nova_queue/lua/.
OK = 0
ALREADY = 1  # idempotent replay of an operation that already took effect
WAIT = 2  # claim: work exists, but a faster worker will finish it sooner
EMPTY = 3  # claim: nothing pending and nothing in flight for this app
QUARANTINED = 4  # claim: the worker is quarantined (failed tasks that succeed elsewhere)
UNKNOWN_TASK = -1
NOT_LEASED = -2
WRONG_WORKER = -3
LEASE_GEN_MISMATCH = -4
ATTEMPT_MISMATCH = -5
JOB_CANCELLED = -6
UNKNOWN_JOB = -7
JOB_EXISTS = -8
BAD_INPUT = -9
WORKER_LOST = -10
BAD_STATE = -11
#: Every status code above by name (each int constant of this block is one): Lua's ``CODE.X``.
CODES: dict[str, int] = {name: value for name, value in dict(globals()).items()
                         if name.isupper() and type(value) is int}

#: The retry-after hints (ms) claim answers with WAIT and EMPTY: Lua's ``WAIT_MS.X``.
WAIT_MS: dict[str, int] = {
    "DRAINING": 500,  # WAIT: nothing pending, but leased tasks may fail back into the queue
    "EMPTY": 1000,  # EMPTY: nothing pending and nothing in flight
    "BLOCKED": 1000,  # WAIT: tasks pending, none this worker may take now (staging, its oom)
    "QUARANTINE_MAX": 2000,  # QUARANTINED: ask again at most this late (an admin may lift it)
    "MIN": 50,  # WAIT from the policy: when the next other worker frees up, within MIN..MAX
    "MAX": 1000,
}


class NovaError(Exception):
    """Base class of every error nova-queue raises on purpose."""


class ConfigError(NovaError):
    """A setting, URL or option is invalid."""


class ProtocolMismatchError(ConfigError):
    """The namespace speaks another protocol version than this release
    (:mod:`nova_queue.protocol`); nothing was written."""

    def __init__(self, namespace: str, theirs: str, ours: int):
        from nova_queue import __version__

        self.namespace, self.theirs, self.ours = namespace, theirs, ours
        shown = theirs if len(theirs) <= 16 and theirs.isprintable() else repr(theirs[:16])
        try:
            newer = float(theirs) > ours
        except ValueError:
            newer = True
        if newer:
            todo = f"upgrade nova-queue here to a release that speaks protocol {shown}"
        else:
            todo = (f"run a release that speaks protocol {shown} here, or move the whole pool "
                    "to a new namespace (docs/DEPLOY.md, Upgrades)")
        super().__init__(f"namespace {namespace!r} speaks protocol {shown} but this nova-queue "
                         f"{__version__} speaks protocol {ours}: {todo}")


#: The start of the error reply a script answers when the namespace's protocol is not its own
#: (``lua/includes/check_protocol.lua``): ``PROTOCOL_MISMATCH <namespace's> <script's>``.
PROTOCOL_MISMATCH_REPLY = "PROTOCOL_MISMATCH"


def protocol_error(exc: Exception, namespace: str) -> ProtocolMismatchError | None:
    """The ProtocolMismatchError a script's error reply ``exc`` stands for, else None."""
    words = str(exc).split()
    if len(words) < 3 or words[0] != PROTOCOL_MISMATCH_REPLY:
        return None
    try:
        ours = int(words[2])
    except ValueError:
        return None
    return ProtocolMismatchError(namespace, words[1], ours)


class InputError(NovaError):
    """User input (a prompts file, a parameter) was rejected; nothing was enqueued."""

    def __init__(self, message: str, *, source: str | None = None, line: int | None = None):
        self.source, self.line, self.reason = source, line, message
        where = source or ""
        if line is not None:
            where = f"{where}:{line}" if where else f"line {line}"
        super().__init__(f"{where}: {message}" if where else message)


class JobNotFoundError(NovaError):
    """No job with that id exists in this namespace."""


class JobExpiredError(JobNotFoundError):
    """The job finished and its Redis data expired (``NOVA_JOB_RETENTION_S``) or was purged;
    its results stay in the store unless they were purged too."""


class JobExistsError(NovaError):
    """A job with that id already exists."""


class InvalidStateError(NovaError):
    """The operation does not apply to the object's current state."""


class TaskNotFoundError(NovaError):
    """No task with that id exists."""


class LeaseError(NovaError):
    """A lease-fenced operation was refused."""


class LeaseLostError(LeaseError):
    """The worker no longer holds the lease (expired, reaped, re-leased or cancelled)."""


class StaleResultError(LeaseLostError):
    """A completion or failure report was rejected: it does not hold the current lease."""

    def __init__(self, task_id: str, reason: str):
        self.task_id, self.reason = task_id, reason
        super().__init__(f"stale report for task {task_id} rejected: {reason}")


class JobCancelledError(StaleResultError):
    """The task's job was cancelled; its result is not wanted."""


class WorkerLostError(NovaError):
    """The worker is not registered or was declared lost; it must register again."""


class TokenError(NovaError):
    """A gateway worker token is missing, unknown or revoked (the gateway answers 401)."""


class AccessDeniedError(NovaError):
    """The token does not allow this app, label or lease (the gateway answers 403)."""


class StoreError(NovaError):
    """The result store failed or refused an operation."""


class ResultTooLargeError(StoreError):
    """A result is larger than the gateway accepts (``NOVA_GATEWAY_MAX_RESULT_BYTES``)."""


class ObjectExistsError(StoreError):
    """A write-once key already holds an object."""


class ObjectNotFoundError(StoreError):
    """No object under that key."""


class BackendError(NovaError):
    """The requested compute backend is missing or failed its self-test."""


class AppError(NovaError):
    """An app is unknown, failed to load, or rejected its parameters."""


class ModelNotFoundError(AppError):
    """A model could not be found locally and cannot be downloaded."""


class InvalidOutput(AppError):
    """A runner's output failed its app's check (``AppRunner.validate``), e.g. an all-black
    image: the worker's fault, not the task's. ``reason`` says what is wrong; the message
    reads ``invalid output: <reason>``."""

    def __init__(self, reason: str):
        super().__init__(f"invalid output: {reason}")
        self.reason = reason


#: What a commit call (``complete``, ``complete_and_claim``, ``complete_batch``) raises only
#: when the commit wrote nothing: the fence refused it (stale, cancelled), its task is gone,
#: or an argument was refused before the script wrote (``BAD_INPUT``; the claim half of
#: ``complete_claim`` is checked before the commit). No task points at the refused
#: attempt's own result key then, so its object may be deleted. Any other error (Redis
#: unreachable, a script error after the commit held) leaves the outcome unknown.
COMMIT_REFUSALS: tuple[type[NovaError], ...] = (StaleResultError, TaskNotFoundError,
                                                InputError)


_STALE_REASONS = {
    NOT_LEASED: "task is not leased",
    WRONG_WORKER: "task is leased by another worker",
    LEASE_GEN_MISMATCH: "lease_gen does not match the current lease",
    ATTEMPT_MISMATCH: "attempt_id does not match the current lease",
}


def raise_for_code(code: int, *, task_id: str = "", job_id: str = "", detail: str = "") -> None:
    """Raise the exception for a negative script status code; return for success codes."""
    if code >= 0:
        return
    if code in _STALE_REASONS:
        reason = _STALE_REASONS[code] + (f" ({detail})" if detail else "")
        raise StaleResultError(task_id, reason)
    if code == JOB_CANCELLED:
        raise JobCancelledError(task_id, "job was cancelled")
    if code == UNKNOWN_TASK:
        raise TaskNotFoundError(f"unknown task {task_id}")
    if code == UNKNOWN_JOB:
        raise JobNotFoundError(f"unknown job {job_id}")
    if code == JOB_EXISTS:
        raise JobExistsError(f"job {job_id} already exists")
    if code == BAD_INPUT:
        raise InputError(detail or "invalid input")
    if code == WORKER_LOST:
        raise WorkerLostError(detail or "worker is not registered or was declared lost")
    if code == BAD_STATE:
        raise InvalidStateError(detail or "invalid state")
    raise NovaError(f"unexpected status code {code} {detail}")
