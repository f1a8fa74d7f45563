"""Bounds the Lua scripts enforce, mirrored for the Python side (one definition in Lua:
``nova_queue/lua/includes/common.lua``; ``tests/core/test_script_bounds.py`` pins that these
equal it). The client checks them before calling, so a bad argument fails with a clear
message instead of the script's BAD_INPUT."""

from __future__ import annotations

#: Tasks per claim (attempt ids per call).
MAX_CLAIM_K = 64
#: Leases per renew.
MAX_RENEW_LEASES = 512
#: Apps per worker.
MAX_APPS = 64
#: Tasks one enqueue call writes (sent in its ARGV).
MAX_CHUNK = 10_000
#: Stored tasks one call cancels, deletes or publishes (moves to the pending set).
MAX_VISIT = 2000
#: Lost workers and expired leases one reap looks at (each kind).
MAX_REAP = 256
#: Tasks per job.
MAX_JOB_TASKS = 100_000_000
#: Attempts per task.
MAX_ATTEMPTS = 1000
#: Lease TTL and grace gap (ms).
MAX_TTL_MS = 86_400_000
#: Approximate length cap of the event stream.
MAX_EVENTS_MAXLEN = 1_000_000_000
#: One task's run time (s).
MAX_RUN_S = 604_800
#: Relative task cost.
MIN_COST, MAX_COST = 1e-9, 1e9
#: Task input (bytes of UTF-8).
MAX_INPUT_BYTES = 65_536
#: A job's params (bytes of JSON).
MAX_PARAMS_BYTES = 65_536
#: JSON objects from callers: worker fields, benchmarks, provenance metadata.
MAX_META_BYTES = 65_536
#: A result held inline in its task's hash (``NOVA_INLINE_RESULT_BYTES`` at most this).
MAX_INLINE_BYTES = 65_536
#: Short texts: an error message, a job name (bytes).
MAX_TEXT_BYTES = 8192
#: A worker's ``cannot_run`` marks (app + model it could not prepare), and one's reason (bytes).
MAX_CANNOT_RUN = 16
MAX_REASON_BYTES = 200
#: The longest ``cannot_run`` field a reader decodes (16 marks, escaped).
MAX_MARKS_BYTES = 16_384
#: A task's run-time limit (s): ``enqueue --timeout`` at most.
MAX_TIMEOUT_S = 604_800
#: A quarantine's cool-down (s).
MAX_COOLDOWN_S = 86_400
#: How long a finished job may stay in Redis (s): 10 years.
MAX_RETENTION_S = 315_360_000
#: The retention of a job that has none of its own (enqueued by a release before retention),
#: and the default of ``NOVA_JOB_RETENTION_S``: 7 days.
DEFAULT_RETENTION_S = 604_800
#: Ids of expired jobs remembered, so readers can say "expired" rather than "unknown".
MAX_TOMBSTONES = 100_000
#: A worker's price (dollars per hour), a job's budget (dollars) and how far ahead its
#: deadline may lie (ms: 365 days); nova_queue/terms.py parses them.
MAX_PRICE = 1_000_000
MAX_BUDGET = 1_000_000_000
MAX_DEADLINE_MS = 31_536_000_000
