--[[ cancel: cancels a job. The first call marks it cancelled (no task of it is leased
  again, in-flight results will be rejected); each call then cancels up to `count`
  pending tasks from `start`, so a huge job never blocks Redis for long.

  KEYS[1] job hash         nova:{ns}:job:<job>
  KEYS[2] pending zset     nova:{ns}:pending:<app>  (the job's app)
  KEYS[3] finished zset    nova:{ns}:finished
  KEYS[4] events stream    nova:{ns}:events

  ARGV[1] key prefix ("nova:{ns}:")
  ARGV[2] job id
  ARGV[3] first task index of this call
  ARGV[4] count: most tasks to visit in this call
  ARGV[5] events MAXLEN (approximate)

  Returns {code, next index or -1 when every task was visited}
    0  OK
   -7  UNKNOWN_JOB
  -11  BAD_STATE (the job already finished, or is still staging)
]]
--- @include "common"

local job_key, pending_key = KEYS[1], KEYS[2]
local prefix, job_id = ARGV[1], ARGV[2]
local start, count = tonumber(ARGV[3]), tonumber(ARGV[4])
local ctx = { prefix = prefix, finished = KEYS[3], events = KEYS[4], maxlen = ARGV[5] }
local j = redis.call('HMGET', job_key, 'state', 'total')
if not j[1] then
  return { -7, -1 }
end
local now = now_ms()
if j[1] == 'done' or j[1] == 'staging' then
  return { -11, 'job is ' .. j[1] }
end
if j[1] ~= 'cancelled' then
  redis.call('HSET', job_key, 'state', 'cancelled', 'cancelled_ms', int(now))
  emit(ctx, 'job_cancelled', 'job', job_id)
end
local total = tonumber(j[2])
local stop = math.min(start + count, total) - 1
local n = 0
for index = start, stop do
  local tid = job_id .. ':' .. index
  local task_key = prefix .. 'task:' .. tid
  if redis.call('HGET', task_key, 'state') == 'pending' then
    redis.call('ZREM', pending_key, tid)
    redis.call('HSET', task_key, 'state', 'cancelled')
    n = n + 1
  end
end
if n > 0 then
  redis.call('HINCRBY', job_key, 'pending', -n)
  redis.call('HINCRBY', job_key, 'cancelled', n)
end
finish_job_if_done(ctx, job_key, job_id, now)
if stop + 1 >= total then
  return { 0, -1 }
end
return { 0, stop + 1 }
