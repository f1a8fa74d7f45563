--[[ fail: a worker reports that a leased task did not produce a result. Fenced like
  complete. The kind decides: "shutdown" (the worker is stopping) and "infra" (the result
  store or another dependency failed, not the task) release without using an attempt, as
  long as that is not a loop (free_hand_back: a few times per task and per worker in a
  window, more only while no other worker succeeds; past that they count as "error");
  "prepare" (the worker could not prepare the job: its app's runtime, its model, the device)
  too, and marks the worker as unable to run the job's app and model for ARGV[13]
  (mark_cannot_run: claims then offer it none of that job's, or such jobs', tasks; a batch's
  leases go back at once, so only the task's own cap applies) unless it holds MAX_CANNOT_RUN
  other live marks, when it counts as "error"; "invalid" (the app's validate rejected the
  worker's output, e.g. an all-black image: the worker's fault) as "prepare", and it also
  counts as a failure of the worker (record_failure); "oom"
  records that this worker could not hold the task: claims send it to a worker with more
  device memory, or one taking a smaller batch, while one is live, and it requeues while
  attempts remain; "error" records that the task failed on this worker
  (claims send it elsewhere while another live worker serves the app), counts against the
  worker (note_failure: a worker whose failures succeed elsewhere is quarantined and its
  attempts given back) and requeues while attempts remain. A quarantined worker's
  attempts are not used. A task out of attempts is failed with the error; its job still
  finishes. A task that also runs as a second attempt (a backup) goes on with the other
  attempt and stays leased.

  KEYS[1]  task hash        nova:{ns}:task:<job>:<index>
  KEYS[2]  job hash         nova:{ns}:job:<job>
  KEYS[3]  worker hash      nova:{ns}:worker:<wid>
  KEYS[4]  held set         nova:{ns}:held:<wid>
  KEYS[5]  pending zset     nova:{ns}:pending:<app>
  KEYS[6]  leases zset      nova:{ns}:leases
  KEYS[7]  inflight hash    nova:{ns}:inflight
  KEYS[8]  failed zset      nova:{ns}:failed
  KEYS[9]  finished zset    nova:{ns}:finished
  KEYS[10] events stream    nova:{ns}:events

  ARGV[1] key prefix ("nova:{ns}:")
  ARGV[2] worker id
  ARGV[3] task id
  ARGV[4] lease_gen
  ARGV[5] attempt_id
  ARGV[6] kind: "error" | "oom" | "shutdown" | "infra" | "prepare" | "invalid"
  ARGV[7] error message (the caller truncates it; bytes past 8192 are dropped here)
  ARGV[8] events MAXLEN (approximate, 1..10^9)
  ARGV[9] quarantine after this many errors in a row, each within ARGV[10] of its claim,
          while other workers succeed (0..1000; 0: never)
  ARGV[10] that time (ms, 0..86400000)
  ARGV[11] quarantine cool-down (ms, 1..86400000)
  ARGV[12] how many tasks the failed run held (1..64; "oom": a smaller batch may fit)
  ARGV[13] "prepare", "invalid": how long the worker's cannot_run mark lasts (ms,
           1000..86400000);
           ignored for other kinds

  Returns {code, new state}
    0  OK      new state = "pending" (requeued) | "failed" | "cancelled" | "leased" (the
               task's other attempt runs on)
   -1  UNKNOWN_TASK
   -2 .. -5   stale, as in complete
   -9  BAD_INPUT {-9, message}: unknown kind, invalid ids, mark time or KEYS (nothing was
       written)
]]
--- @include "common"
--- @include "checks"
--- @include "fence"
--- @include "reject_stale"
--- @include "record_failure"
--- @include "release_attempt"
--- @include "note_failure"
--- @include "free_hand_back"
--- @include "mark_cannot_run"

local task_key, job_key, worker_key = KEYS[1], KEYS[2], KEYS[3]
local prefix, wid, tid, gen, attempt_id = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local kind, message = ARGV[6], string.sub(ARGV[7] or '', 1, MAX_TEXT_BYTES)
local q = { fast_fails = int_in(ARGV[9], 0, MAX_ATTEMPTS), fast_ms = int_in(ARGV[10], 0, MAX_TTL_MS),
  cooldown_ms = int_in(ARGV[11], 1, MAX_COOLDOWN_MS) }
local batch = int_in(ARGV[12], 1, MAX_CLAIM_K)
local marks = kind == 'prepare' or kind == 'invalid' -- the worker cannot run this job well
local mark_ms = marks and int_in(ARGV[13], 1000, MAX_TTL_MS)
local ctx = {
  prefix = prefix, pending = KEYS[5], leases = KEYS[6], inflight = KEYS[7], failed = KEYS[8],
  finished = KEYS[9], events = KEYS[10], maxlen = ARGV[8],
}
local burn = kind == 'error' or kind == 'oom'
if not burn and kind ~= 'shutdown' and kind ~= 'infra' and not marks then
  return bad_input('unknown failure kind ' .. string.sub(tostring(kind), 1, 40))
end
-- as complete: the fence compares worker, lease_gen and attempt id with what claim wrote
if not is_task_id(tid) or #wid > 128 or #gen > 20 or #attempt_id > 64
    or not int_in(ARGV[8], 1, MAX_EVENTS_MAXLEN) or not q.fast_fails or not q.fast_ms
    or not q.cooldown_ms or not batch or (marks and not mark_ms) then
  return bad_input('invalid worker id, task id, lease_gen, attempt id, events MAXLEN, '
    .. 'quarantine policy, batch size or mark time')
end
if not keys_are(prefix, KEYS, { 'task:' .. tid, 'job:' .. job_of(tid), 'worker:' .. wid,
    'held:' .. wid, false, 'leases', 'inflight', 'failed', 'finished', 'events' }) then
  return bad_input('KEYS do not match the namespace, task and worker')
end
local app = redis.call('HGET', job_key, 'app')
if app and KEYS[5] ~= prefix .. 'pending:' .. app then
  return bad_input("KEYS[5] is not the pending set of the task's app")
end
local now = now_ms()

local t = redis.call('HMGET', task_key, unpack(FAIL_TASK))
if not t[FAIL_TASK.state] then
  return { CODE.UNKNOWN_TASK, '' }
end
local code, which = fence(task_key, t, wid, gen, attempt_id)
if code ~= CODE.OK then
  reject_stale(ctx, tid, wid, 'fail', gen, t, code)
  return { code, t[FAIL_TASK.state] }
end

if marks and app and not mark_cannot_run(worker_key, job_key, app, message, now, mark_ms) then
  kind, burn = 'error', true -- its list of marks is full: no free hand-back past the cap
elseif not burn and not free_hand_back(ctx, tid, wid, now, not marks) then
  message = string.sub('handed back without a result too often (' .. kind .. '): ' .. message,
    1, MAX_TEXT_BYTES)
  kind, burn = 'error', true -- a loop: it counts as a failure of this worker
end
record_failure(task_key, worker_key, t, wid, kind, batch)
local quarantined = redis.call('HGET', worker_key, 'quarantined') == '1'
local state = release_attempt(ctx, tid, wid, now, kind, message, burn and not quarantined)
if kind == 'error' then
  note_failure(ctx, wid, tid, app, now, which == 'backup' and t[FAIL_TASK.b_claimed_ms]
    or t[FAIL_TASK.claimed_ms], message, q)
end
if redis.call('SCARD', KEYS[4]) == 0 and redis.call('EXISTS', worker_key) == 1 then
  redis.call('HSET', worker_key, 'state', 'idle', 'busy_until_ms', int(now))
end
return { CODE.OK, state }
