--[[ cancel: cancels a job. The first call marks it cancelled (no task of it is leased
  again, in-flight results will be rejected); each call then cancels up to `count` of the
  job's pending tasks, found in the pending set by their scores (priority, then seq0 +
  index + 1), so a huge job never blocks Redis for long. The walk is bounded by the
  members present in that score range and by `count`, never by the job's `total` (a
  writable field); members of other jobs in the range are skipped.

  KEYS[1] job hash         nova:{ns}:job:<job>
  KEYS[2] pending zset     nova:{ns}:pending:<app>  (the job's app)
  KEYS[3] finished zset    nova:{ns}:finished
  KEYS[4] events stream    nova:{ns}:events
  KEYS[5] meta hash        nova:{ns}:meta

  ARGV[1] key prefix ("nova:{ns}:")
  ARGV[2] job id
  ARGV[3] cursor: 0 on the first call, then what the previous call returned
  ARGV[4] count: most pending-set members to visit in this call (1..2000)
  ARGV[5] events MAXLEN (approximate, 1..10^9)

  Returns {code, next cursor or -1 when every pending task of the job was visited}
    0  OK
   -7  UNKNOWN_JOB
   -9  BAD_INPUT {-9, message}: an argument or KEYS is invalid (nothing written)
  -11  BAD_STATE (the job already finished or expired, or is still staging)
  or the error reply PROTOCOL_MISMATCH (check_protocol): nothing written
]]
--- @include "common"
--- @include "checks"
--- @include "check_protocol"

local job_key, pending_key = KEYS[1], KEYS[2]
local prefix, job_id = ARGV[1], ARGV[2]
local cursor, count = int_in(ARGV[3], 0, 1e16), int_in(ARGV[4], 1, MAX_VISIT)
local ctx = { prefix = prefix, finished = KEYS[3], events = KEYS[4], maxlen = ARGV[5] }
if not is_job_id(job_id) or not cursor or not count or not int_in(ARGV[5], 1, MAX_EVENTS_MAXLEN)
    or not keys_are(prefix, KEYS, { 'job:' .. job_id, false, 'finished', 'events', 'meta' }) then
  return bad_input('invalid job id, cursor, count (1..' .. MAX_VISIT .. ') or events MAXLEN, '
    .. 'or KEYS that do not match')
end
check_protocol(KEYS[5])
local state, total, app, priority, seq0 = unpack(redis.call('HMGET', job_key, 'state', 'total',
  'app', 'priority', 'seq0'))
if not state then
  return { CODE.UNKNOWN_JOB, -1 }
end
if pending_key ~= prefix .. 'pending:' .. (app or '') then
  return bad_input("KEYS[2] is not the pending set of the job's app")
end
if (is_finished(state) and state ~= 'cancelled') or state == 'staging' or state == 'expired' then
  return { CODE.BAD_STATE, 'job is ' .. state }
end
local now = now_ms()
if state ~= 'cancelled' then
  redis.call('HSET', job_key, 'state', 'cancelled', 'cancelled_ms', int(now))
  emit(ctx, 'job_cancelled', 'job', job_id)
end

-- the job's score range in the pending set (the fields only aim the range; the members
-- found are checked one by one)
local first = tonumber(pending_score(int_in(priority, -1000, 1000) or 0,
  (int_in(seq0, 0, 2 ^ 42) or 0) + 1))
local last = first + (int_in(total, 1, MAX_JOB_TASKS) or MAX_JOB_TASKS) - 1
local from = cursor > 0 and ('(' .. int(cursor)) or int(first)
local found = redis.call('ZRANGEBYSCORE', pending_key, from, int(last), 'WITHSCORES',
  'LIMIT', 0, count)
local n, ours = 0, {}
local tid_prefix = job_id .. ':'
for i = 1, #found, 2 do
  local tid = found[i]
  if string.sub(tid, 1, #tid_prefix) == tid_prefix and is_task_id(tid) then
    ours[#ours + 1] = tid
    local task_key = prefix .. 'task:' .. tid
    if redis.call('HGET', task_key, 'state') == 'pending' then
      redis.call('HSET', task_key, 'state', 'cancelled')
      n = n + 1
    end
  end
end
for from = 1, #ours, 1000 do
  redis.call('ZREM', pending_key, unpack(ours, from, math.min(from + 999, #ours)))
end
if n > 0 then
  redis.call('HINCRBY', job_key, 'pending', -n)
  redis.call('HINCRBY', job_key, 'cancelled', n)
end
finish_job_if_done(ctx, job_key, job_id, now)
if #found < 2 * count then
  return { CODE.OK, -1 }
end
return { CODE.OK, found[#found] }
