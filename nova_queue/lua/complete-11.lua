--[[ complete: commits a task's result, fenced by worker, lease_gen and attempt_id.

  A report that does not hold the current lease is rejected and recorded as a
  stale_rejected event; the committed task never changes. Replaying the same commit
  (its reply was lost) answers ALREADY. Warm runs update the worker's moving average
  of seconds per cost unit for the app; a cold run (first after a load) is kept apart
  as compile/warm-up time.

  KEYS[1]  task hash        nova:{ns}:task:<job>:<index>
  KEYS[2]  job hash         nova:{ns}:job:<job>
  KEYS[3]  worker hash      nova:{ns}:worker:<wid>
  KEYS[4]  held set         nova:{ns}:held:<wid>
  KEYS[5]  fleet zset       nova:{ns}:app:<app>:fleet
  KEYS[6]  leases zset      nova:{ns}:leases
  KEYS[7]  alive zset       nova:{ns}:alive
  KEYS[8]  inflight hash    nova:{ns}:inflight
  KEYS[9]  failed zset      nova:{ns}:failed
  KEYS[10] finished zset    nova:{ns}:finished
  KEYS[11] events stream    nova:{ns}:events

  ARGV[1]  key prefix ("nova:{ns}:")
  ARGV[2]  worker id
  ARGV[3]  task id
  ARGV[4]  lease_gen
  ARGV[5]  attempt_id
  ARGV[6]  result key in the store
  ARGV[7]  run time (s) of this task
  ARGV[8]  warm: "1" steady-state run, "0" first run after a load
  ARGV[9]  moving-average weight of the new sample (0 < alpha <= 1)
  ARGV[10] events MAXLEN (approximate)
  ARGV[11] provenance metadata (JSON object, stored as is)

  Returns {code, job_finished}
    0  OK           job_finished = 1 if this commit finished the job
    1  ALREADY      this exact commit had already taken effect
   -1  UNKNOWN_TASK
   -2  NOT_LEASED   (stale: task is pending, failed, cancelled, or done by another lease)
   -3  WRONG_WORKER (stale)
   -4  LEASE_GEN_MISMATCH (stale)
   -5  ATTEMPT_MISMATCH (stale)
   -6  JOB_CANCELLED (the task is now cancelled)
]]
--- @include "common"
--- @include "fence"
--- @include "release"

local task_key, job_key, worker_key, held_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local fleet_key, leases_key = KEYS[5], KEYS[6]
local prefix, wid, tid, gen, attempt_id = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local result_key, run_s, warm, alpha = ARGV[6], tonumber(ARGV[7]) or 0, ARGV[8] == '1', tonumber(ARGV[9])
local ctx = {
  prefix = prefix, leases = leases_key, alive = KEYS[7], inflight = KEYS[8], failed = KEYS[9],
  finished = KEYS[10], events = KEYS[11], maxlen = ARGV[10],
}
local now = now_ms()
local job_id, index = job_of(tid), index_of(tid)

local t = redis.call('HMGET', task_key, 'state', 'worker', 'lease_gen', 'attempt_id', 'result', 'cost')
if not t[1] then
  return { -1, 0 }
end
if t[1] == 'done' and t[2] == wid and t[3] == gen and t[4] == attempt_id
    and t[5] == result_key then
  return { 1, 0 } -- this exact commit already took effect (its reply was lost)
end
local code = fence(t, wid, gen, attempt_id)
local j = redis.call('HMGET', job_key, 'state', 'app')
if code == 0 and j[1] == 'cancelled' then
  release(ctx, tid, now, 'cancelled', 'job cancelled', false)
  code = -6
end
if code ~= 0 then
  reject_stale(ctx, tid, wid, 'complete', gen, t, code)
  return { code, 0 }
end

local app = j[2]
if warm then
  redis.call('HSET', task_key, 'state', 'done', 'result', result_key, 'finished_ms', int(now),
    'run_s', num(run_s), 'warm', '1', 'meta', ARGV[11])
else
  redis.call('HSET', task_key, 'state', 'done', 'result', result_key, 'finished_ms', int(now),
    'run_s', num(run_s), 'warm', '0', 'meta', ARGV[11], 'cold_s', num(run_s))
end
redis.call('ZREM', leases_key, tid)
redis.call('SREM', held_key, tid)
redis.call('HINCRBY', ctx.inflight, app, -1)
redis.call('HINCRBY', job_key, 'leased', -1)
redis.call('HINCRBY', job_key, 'done', 1)

-- the worker's speed: moving average of warm runs, cold runs kept apart; one read, one write
local w = redis.call('HMGET', worker_key, 'id', 'tasks_done', 'done:' .. app, 'ema:' .. app, 'n:' .. app)
if w[1] then
  local update = { 'tasks_done', (tonumber(w[2]) or 0) + 1, 'done:' .. app, (tonumber(w[3]) or 0) + 1 }
  local cost = tonumber(t[6]) or 1
  if warm and cost > 0 then
    local sample = run_s / cost
    local ema = tonumber(w[4])
    local n = tonumber(w[5]) or 0
    if n > 0 and ema then
      ema = alpha * sample + (1 - alpha) * ema
    else
      ema = sample
    end
    update[#update + 1], update[#update + 2] = 'ema:' .. app, num(ema)
    update[#update + 1], update[#update + 2] = 'n:' .. app, n + 1
    if redis.call('ZSCORE', ctx.alive, wid) then
      redis.call('ZADD', fleet_key, num(ema), wid)
    end
  elseif not warm then
    update[#update + 1], update[#update + 2] = 'cold:' .. app, num(run_s)
  end
  if redis.call('SCARD', held_key) == 0 then
    update[#update + 1], update[#update + 2] = 'state', 'idle'
    update[#update + 1], update[#update + 2] = 'busy_until_ms', int(now)
  end
  redis.call('HSET', worker_key, unpack(update))
end

emit(ctx, 'completed', 'job', job_id, 'task', index, 'worker', wid, 'lease_gen', gen,
  'run_s', num(run_s), 'warm', warm and '1' or '0', 'result', result_key)
local finished = finish_job_if_done(ctx, job_key, job_id, now)
return { 0, finished }
