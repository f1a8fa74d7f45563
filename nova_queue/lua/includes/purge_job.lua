--[[ purge_job: deletes a finished job's data from Redis, at most `budget` task hashes per
  call, from the lowest index not yet deleted (its field purge_next) up to the first missing
  one: a job's tasks are 0 .. total-1 without gaps, and `total` is a writable field, so it
  decides nothing. The first call takes the job out of the listings (jobs, finished, its
  owner's queue of its app, and the owner out of the app's owners when that queue is left
  empty) and marks it 'expired'; deleted tasks leave `failed`. The last call deletes the job hash and its
  retention entry, leaves a tombstone in `expired` (readers say "expired", or "purged" for a
  score that ends in PURGED_MARK, not "unknown") and emits job_expired. A task's inline
  result (inline:<task id>) goes with it; results in the store are not touched.
  why: 'retention' | 'purge'.
  ctx fields used: prefix, jobs, finished, failed, expiring, expired, events, maxlen.
  Returns tasks deleted, done (true when nothing of the job is left).
]]
--- @include "common"
local function purge_job(ctx, job_id, now, budget, why)
  local job_key = ctx.prefix .. 'job:' .. job_id
  local state, purge_next, app, owner = unpack(redis.call('HMGET', job_key, 'state',
    'purge_next', 'app', 'owner'))
  local index = int_in(purge_next, 0, MAX_JOB_TASKS) or 0
  if state ~= 'expired' then
    redis.call('ZREM', ctx.jobs, job_id)
    redis.call('ZREM', ctx.finished, job_id)
    if state then
      redis.call('HSET', job_key, 'state', 'expired')
    end
    if is_name(app, 64) then -- a claim drops a taken job only under fair share (owner_jobs)
      local base = ctx.prefix .. 'app:' .. app .. ':'
      local queue = base .. 'owner:' .. (owner or '')
      if redis.call('ZREM', queue, job_id) == 1 and redis.call('ZCARD', queue) == 0 then
        redis.call('SREM', base .. 'owners', owner or '')
      end
    end
  end
  local task_prefix = ctx.prefix .. 'task:' .. job_id .. ':'
  local inline_prefix = ctx.prefix .. 'inline:' .. job_id .. ':'
  local tids, missing = {}, false
  while #tids < budget do
    if redis.call('DEL', task_prefix .. index, inline_prefix .. index) == 0 then
      missing = true
      break
    end
    tids[#tids + 1] = job_id .. ':' .. index
    index = index + 1
  end
  for from = 1, #tids, 1000 do
    redis.call('ZREM', ctx.failed, unpack(tids, from, math.min(from + 999, #tids)))
  end
  if not missing then
    redis.call('HSET', job_key, 'purge_next', int(index))
    return #tids, false
  end
  redis.call('DEL', job_key)
  redis.call('ZREM', ctx.expiring, job_id)
  redis.call('ZADD', ctx.expired, why == 'purge' and now + PURGED_MARK or now, job_id)
  emit(ctx, 'job_expired', 'job', job_id, 'tasks', int(index), 'why', why)
  return #tids, true
end
