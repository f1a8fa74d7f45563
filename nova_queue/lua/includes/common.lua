--[[ common: limits, input checks, time, number formatting, events, job completion.
  Included by every script (through other includes too; the loader adds it once). CODE.<NAME>
  and WAIT_MS.<NAME> (nova_queue/errors.py), the constants below and the hash layouts
  (JOB_COUNTS here; each reader declares its own) are folded into their uses when
  nova_queue/scripts.py loads a script: they cost nothing per call.
  ctx fields used here: prefix, events, maxlen, finished.
]]
local SCORE_PRIORITY_STEP = 4398046511104 -- 2^42: seq space per priority level

-- Limits. No script trusts a count, size or index that a caller (ARGV) or a writable field
-- supplies: every loop is bounded by the data present and by one of these per call, and
-- every number is checked before anything is written. nova_queue/limits.py mirrors them.
local MAX_CLAIM_K = 64             -- tasks per claim (attempt ids per call)
local MAX_RENEW_LEASES = 512       -- leases per renew
local MAX_HELD_VISIT = 256         -- held-set members one call visits
local MAX_FLEET_VISIT = 256        -- other workers the claim policy weighs (the fastest)
local MAX_RELEASES = 256           -- leases released plus workers removed, per call
local MAX_REAP = 256               -- lost workers / expired leases one call looks at
local MAX_APPS = 64                -- apps per worker
local MAX_CHUNK = 10000            -- tasks one enqueue call writes (sent in its ARGV)
local MAX_VISIT = 2000             -- stored tasks one call cancels, deletes or publishes
local MAX_JOB_TASKS = 100000000    -- tasks per job
local MAX_ATTEMPTS = 1000          -- attempts per task
local MAX_TTL_MS = 86400000        -- lease TTL, grace gap (1 day)
local MAX_EVENTS_MAXLEN = 1000000000
local MAX_RUN_S = 604800           -- one task's run time (7 days)
local MIN_COST, MAX_COST = 1e-9, 1e9          -- relative task cost
local MIN_SPEED, MAX_SPEED = 1e-12, 1e12      -- seconds per cost unit
local MAX_INPUT_BYTES = 65536      -- task input
local MAX_PARAMS_BYTES = 65536     -- job params (JSON)
local MAX_META_BYTES = 65536       -- JSON objects from callers (fields, benchmarks, provenance)
local MAX_INLINE_BYTES = 65536     -- a result held in its task's hash instead of the store
local MAX_TEXT_BYTES = 8192        -- short texts (an error message, a job name)
local MAX_FIELDS = 64              -- worker fields at register
local MAX_OOM_BYTES = 4096         -- a task's list of workers that ran out of memory on it
local MAX_LISTED = 32              -- workers of a task's oom / failed_on lists one claim weighs
local MAX_STREAK = 64              -- task ids of a worker's failure streak kept (refunds)
local MAX_TIMEOUT_MS = 604800000   -- a task's run-time limit (7 days)
local MAX_COOLDOWN_MS = 86400000   -- a quarantine's cool-down (doubles per failed probe)
local MAX_BACKUP_SCAN = 64         -- leases a claim looks at for a backup attempt
local MAX_JOB_VISIT = 16           -- jobs a claim's candidate scan walks past
local MAX_LABELS = 32              -- labels of a worker (placement.py mirrors it)
local MAX_REQUIRES = 16            -- requirements of a job, and values of one
local MAX_CANNOT_RUN = 16          -- a worker's cannot_run marks (app + model it cannot prepare)
local MAX_REASON_BYTES = 200        -- the reason of one mark
local MAX_MARKS_BYTES = 16384       -- the cannot_run field a script decodes (16 marks)
local MAX_MARKS_DECODED = 8        -- other workers' cannot_run fields one claim decodes
local BACKUP_MIN_GAIN_MS = 1000    -- a backup must finish this much sooner ...
local BACKUP_GAIN_SHARE = 0.5      -- ... and by this share of the running attempt's rest
local MIN_CLAIMING_MS = 5000       -- others count on a worker that claimed this recently (or
                                   -- its lease TTL, if longer), or is within its predicted run
local FREE_BACKS_PER_TASK = 3      -- hand-backs without an attempt (shutdown, infra, prepare)
                                   -- one task gets free while other workers succeed ...
local FREE_BACKS_PER_WINDOW = 64   -- ... and one worker's identity in FREE_WINDOW_MS
local FREE_WINDOW_MS = 60000
local MAX_RETENTION_S = 315360000  -- how long a finished job stays in Redis (10 years)
local DEFAULT_RETENTION_S = 604800 -- a job without its own (enqueued before retention): 7 days
local MAX_TOMBSTONES = 100000      -- ids of expired jobs remembered (to say "expired")
-- Money and time (nova_queue/terms.py): a worker's price, a job's budget and deadline
local MAX_PRICE = 1000000          -- dollars per hour of a worker's time
local MAX_BUDGET = 1000000000      -- dollars a job may spend
local MAX_DEADLINE_MS = 31536000000 -- how far ahead a job's deadline may lie (365 days)
local DEADLINE_SLACK = 0.05        -- share of the time left a deadline's plan keeps in hand
-- Verification of results from workers that are not trusted (docs/SECURITY.md)
local MAX_UNVERIFIED = 1024        -- an identity's latest results that stand unverified, kept
                                   -- to re-run if it is caught (older ones are forgotten)
local MAX_VERIFY_SCAN = 16         -- results awaiting verification one claim looks at
local VERIFY_HALF = 4              -- share verified: HALF / (HALF + agreements in a row) ...
local VERIFY_FLOOR = 0.05          -- ... never below this (and this once trust is earned)
local TRUST_AFTER = 20             -- agreements in a row that earn trust
local VERIFY_WAIT_MS = 2000        -- trusted verifiers go first; then others may verify
local MAX_VERIFY_TRIES = 3         -- verifier attempts that end without a commit: then failed
local VERIFY_ORPHAN_MS = 10000     -- a result awaiting verification this long is looked at:
                                   -- with no live worker that may verify it, it stands
local MAX_VERIFIER_VISIT = 256     -- live workers of an app looked at for a verifier (more:
                                   -- one is assumed)
local MIN_TOMBSTONE_S = 60         -- ... for as long again as the retention, a minute at least
local PURGED_MARK = 0.5            -- a purged job's tombstone score: the ms it was purged + this
local MAX_EXPIRE_JOBS = 256        -- due jobs (and old tombstones) one sweep looks at
local MAX_HALF_LIFE_S = 31536000   -- fair share's usage half-life (365 days)
local LN2 = 0.69314718055994531    -- log2(x) = math.log(x) / LN2 (Lua 5.1 has no log2)
local LOG2_MAX_USAGE = 49.828921423310435 -- log2(1e15): an owner's usage <= 1e15 s

-- Hash layouts: what a reader reads of a hash (one HMGET, fields in this order) and hands on
-- as a record: `redis.call('HMGET', key, unpack(NAME))`, its fields read as t[NAME.field].
-- The loader writes the fields and the indices in (nova_queue/scripts.py: nothing per call,
-- and a field a layout lacks does not load). A layout named first in another is that one's
-- head: a record of the longer one is also one of the shorter. A read that stays in one
-- function names its fields as locals instead: local a, b = unpack(redis.call('HMGET', ...)).
-- Only what a path weighs: a field the hash lacks costs Redis a walk over all of it.
--
-- job:<job>, as finish_job_with weighs it (finish_job_if_done reads it)
local JOB_COUNTS = { 'state', 'total', 'done', 'failed', 'cancelled', 'finished_ms' }
-- job:<job>, as a commit weighs it (complete_task; commit_batch, once per batch)
local COMMIT_JOB = { JOB_COUNTS, 'app', 'leased', 'owner' }
-- job:<job>, as the candidate scan weighs it (consider_job, cached in s.jobs for the claim)
local CLAIM_JOB = { 'state', 'params', 'pending', 'leased', 'timeout_s', 'requires', 'priority',
  'seq0', 'total', 'model', 'owner', 'deadline_ms', 'budget' }
-- job:<job>, its task counts by state (the order of the doctor's counts: recount_job), and
-- with what says whether it finishes (RECOUNT_JOB)
local STATE_COUNTS = { 'pending', 'leased', 'done', 'failed', 'cancelled' }
local RECOUNT_JOB = { STATE_COUNTS, 'state', 'total', 'finished_ms' }
-- job:<job> of a running task a backup may take (find_backup, for write_backup)
local BACKUP_JOB = { 'app', 'state', 'params', 'timeout_s', 'model', 'deadline_ms' }
-- job:<job> of a result awaiting verification (take_verify, for write_verify_lease)
local VERIFY_JOB = { 'state', 'params', 'timeout_s', 'model' }
-- task:<job>:<index>, the attempts a report is fenced by (fence: the first fields of every
-- read of a task a report is checked against); the backup's lease_gen and attempt id are
-- read by the fence itself, only when the backup's worker reports
local LEASE = { 'state', 'worker', 'lease_gen', 'attempt_id', 'b_worker' }
-- task:<job>:<index>, as a commit weighs it (fence_commit)
local COMMIT_TASK = { LEASE, 'cost', 'failed_on', 'charged' }
-- task:<job>:<index>, a result awaiting verification, as a claim weighs it (take_verify)
local VERIFY_TASK = { 'state', 'cand_wid', 'cand2_wid', 'v_need', 'v_since_ms', 'cost', 'input',
  'lease_gen', 'gen_top', 'attempt_count', 'cand', 'cand2', 'cand_owner', 'cand2_owner' }
-- task:<job>:<index>, its results awaiting verification, as the verifier's commit weighs them
-- (settle_verify)
local CAND_TASK = { 'cand', 'cand_wid', 'cand_name', 'cand_backend', 'cand_host', 'cand_run_s',
  'cand_ms', 'cand_meta', 'cand_gen', 'cand_attempt', 'cand2', 'cand2_wid', 'cand2_ms' }
-- task:<job>:<index>, as a renew weighs it (renew_lease)
local RENEW_TASK = { LEASE, 'run_deadline_ms', 'b_run_deadline_ms', 'claimed_ms', 'b_claimed_ms',
  'deadline_ms', 'b_deadline_ms', 'last_worker', 'error_kind' }
-- task:<job>:<index>, as a failure report weighs it (fail-10, record_failure)
local FAIL_TASK = { LEASE, 'oom', 'failed_on', 'claimed_ms', 'b_claimed_ms', 'oom_memory',
  'oom_batch' }
-- task:<job>:<index>, as the candidate scan weighs a pending one (consider_pending, kept in
-- s.tasks for grant_count, oom_fits and write_leases)
local CLAIM_TASK = { 'cost', 'oom', 'input', 'lease_gen', 'attempt_count', 'state', 'gen_top',
  'failed_on', 'oom_memory', 'oom_batch' }
-- task:<job>:<index>, a running one a backup may take (find_backup, for write_backup)
local BACKUP_TASK = { 'state', 'worker', 'claimed_ms', 'predicted_s', 'cost', 'backups', 'oom',
  'failed_on', 'lease_gen', 'attempt_count', 'input', 'gen_top', 'deadline_ms' }
-- task:<job>:<index>, one attempt's fields (drop_attempt: the primary's; BACKUP_ATTEMPT, the
-- backup's: the same names prefixed b_, in the same order, so a record of either is read
-- with ATTEMPT's indices)
local ATTEMPT = { 'worker', 'worker_name', 'backend', 'host', 'lease_gen', 'attempt_id',
  'claimed_ms', 'deadline_ms', 'run_deadline_ms', 'predicted_s' }
local BACKUP_ATTEMPT = { 'b_worker', 'b_worker_name', 'b_backend', 'b_host', 'b_lease_gen',
  'b_attempt_id', 'b_claimed_ms', 'b_deadline_ms', 'b_run_deadline_ms', 'b_predicted_s' }

-- A finite number in [lo, hi], else nil.
local function num_in(x, lo, hi)
  local n = tonumber(x)
  if n and n == n and n >= lo and n <= hi then
    return n
  end
  return nil
end

-- An integer in [lo, hi], else nil.
local function int_in(x, lo, hi)
  local n = num_in(x, lo, hi)
  if n and n % 1 == 0 then
    return n
  end
  return nil
end

-- Ids that become parts of keys: the patterns of nova_queue/keys.py.
local function is_job_id(s)
  return type(s) == 'string' and #s <= 64 and string.match(s, '^[A-Za-z0-9_%-]+$') ~= nil
end

local function is_name(s, max) -- app names (64), worker ids (128)
  return type(s) == 'string' and #s <= max and string.match(s, '^[A-Za-z0-9_.%-]+$') ~= nil
end

local is_attempt_id = is_job_id

-- "<job>:<index>": a job id and a decimal index.
local function is_task_id(s)
  return type(s) == 'string' and #s <= 80 and string.find(s, '^[A-Za-z0-9_%-]+:%d+$') ~= nil
end

local function bad_input(message)
  return { CODE.BAD_INPUT, message }
end

-- Redis TIME in milliseconds: the one clock every worker agrees on.
local function now_ms()
  local seconds, micros = unpack(redis.call('TIME'))
  return tonumber(seconds) * 1000 + math.floor(tonumber(micros) / 1000)
end

-- Integers as exact decimal strings (Lua's tostring keeps only 14 digits). An integral
-- value below 2^53 takes '%d' (the C long of Redis's Lua: the same digits, without the
-- floating-point formatting of '%.0f', which a claim would pay some 30 times).
local function int(x)
  if x % 1 == 0 and math.abs(x) < 9007199254740992 and x ~= 0 then
    return string.format('%d', x)
  end
  return string.format('%.0f', x)
end

local function num(x)
  return string.format('%.10g', x)
end

-- Pending-set score: higher priority first, then FIFO by seq.
local function pending_score(priority, seq)
  return int((1000 - (tonumber(priority) or 0)) * SCORE_PRIORITY_STEP + tonumber(seq))
end

-- A task's seq is its job's seq0 + index + 1 (seq0 is reserved at enqueue), so a
-- requeued task returns to its old place without storing seq in every task hash.
local function task_score(priority, seq0, tid)
  return pending_score(int_in(priority, -1000, 1000) or 0,
    (int_in(seq0, 0, 2 ^ 42) or 0) + tonumber(string.match(tid, ':(%d+)$')) + 1)
end

-- One entry of the event stream: etype and its fields as in nova_queue/events.py (the one
-- table of event types; tests/core/test_events.py checks every emit call against it).
local function emit(ctx, etype, ...)
  redis.call('XADD', ctx.events, 'MAXLEN', '~', ctx.maxlen, '*', 'type', etype, ...)
end

-- A list's values as one field: its one value when all are equal, else comma-separated.
local function packed(list)
  local first = list[1]
  for i = 2, #list do
    if list[i] ~= first then
      return table.concat(list, ',')
    end
  end
  return first
end

local function job_of(tid)
  return string.match(tid, '^(.*):%d+$')
end

local function index_of(tid)
  return string.match(tid, ':(%d+)$')
end

-- The identity a worker id belongs to: what precedes its last '.' (a gateway worker's token
-- name; a direct worker's node, keys.ident_of); an id without one is its own. Blame follows
-- the identity: a task's failed_on lists identities, and a new worker id of an identity takes
-- over its previous one's quarantine and failure streak (register-6).
local function ident_of(wid)
  return string.match(wid, '^(.+)%.[^.]+$') or wid
end

-- A job's state once every task of it ended: it runs no more (a retry of a done or failed
-- job's failed task starts it again; a cancelled one stays cancelled).
local function is_finished(state)
  return state == 'done' or state == 'failed' or state == 'cancelled'
end

-- Marks the job finished once every task is terminal; returns 1 if this call finished it.
-- j = the job's current JOB_COUNTS (or a layout that begins with them). Its state
-- then: 'cancelled' stays; else 'failed' when not one task is done (every task failed),
-- else 'done' (its failed count says how many did not). A done or failed job enters the
-- post-processing outbox (`finished`: a failed job's manifest lists each task's error and
-- its webhook says so); every finished job enters the retention index, scored by when it
-- expires (its retention_s after now): the sweep (expire-10) deletes it then. That key is
-- built from the prefix, not passed in KEYS, so that the claim path's KEYS stay as they
-- are; it shares the namespace's hash tag.
local function finish_job_with(ctx, job_key, job_id, now, j)
  local done, failed, cancelled = j[JOB_COUNTS.done], j[JOB_COUNTS.failed], j[JOB_COUNTS.cancelled]
  local total, done_n = tonumber(j[JOB_COUNTS.total]) or 0, tonumber(done) or 0
  local terminal = done_n + (tonumber(failed) or 0) + (tonumber(cancelled) or 0)
  if total == 0 or terminal < total or j[JOB_COUNTS.finished_ms] then
    return 0
  end
  local state = j[JOB_COUNTS.state]
  if state ~= 'cancelled' then
    state = done_n > 0 and 'done' or 'failed'
    redis.call('ZADD', ctx.finished, now, job_id)
  end
  redis.call('HSET', job_key, 'state', state, 'finished_ms', int(now))
  local retention_s = int_in(redis.call('HGET', job_key, 'retention_s'), 0, MAX_RETENTION_S)
    or DEFAULT_RETENTION_S
  redis.call('ZADD', ctx.prefix .. 'expiring', int(now + 1000 * retention_s), job_id)
  emit(ctx, 'job_finished', 'job', job_id, 'state', state, 'done', done or '0',
    'failed', failed or '0', 'cancelled', cancelled or '0')
  return 1
end

local function finish_job_if_done(ctx, job_key, job_id, now)
  return finish_job_with(ctx, job_key, job_id, now,
    redis.call('HMGET', job_key, unpack(JOB_COUNTS)))
end
