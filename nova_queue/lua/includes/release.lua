--[[ release: ends a lease without a commit (failure, expiry, lost worker, shutdown).
  The task goes back to pending, or to failed when its attempts are used up, or to
  cancelled when its job was cancelled. `burn` = false gives the attempt back.
  ctx fields used: prefix, leases, inflight, failed, events, maxlen, finished, and
  pending when the caller passed the task's pending key in KEYS; budget (releases this
  call may still make) where the caller loops.
  Returns the task's new state, or nil if it was not leased.
]]
local function release(ctx, tid, now, kind, message, burn)
  redis.call('ZREM', ctx.leases, tid)
  if not is_task_id(tid) then
    return nil -- not a task id (a lease written by hand): nothing to release
  end
  local task_key = ctx.prefix .. 'task:' .. tid
  local t = redis.call('HMGET', task_key, 'state', 'worker', 'attempt_count', 'lease_gen')
  if t[1] ~= 'leased' then
    return nil
  end
  local job_id = job_of(tid)
  local job_key = ctx.prefix .. 'job:' .. job_id
  local j = redis.call('HMGET', job_key, 'app', 'state', 'max_attempts', 'priority', 'seq0')
  local wid = t[2] or ''
  redis.call('SREM', ctx.prefix .. 'held:' .. wid, tid)
  if not j[1] then
    redis.call('HSET', task_key, 'state', 'failed', 'error', 'job not found')
    return 'failed' -- a task without a job (written by hand)
  end
  if ctx.budget then
    ctx.budget = ctx.budget - 1
  end
  redis.call('HINCRBY', ctx.inflight, j[1], -1)
  redis.call('HINCRBY', job_key, 'leased', -1)
  local attempts = int_in(t[3], 0, 1e15) or 0
  if not burn and attempts > 0 then
    attempts = attempts - 1
  end
  local state
  if j[2] == 'cancelled' then
    state = 'cancelled'
    redis.call('HINCRBY', job_key, 'cancelled', 1)
  elseif burn and attempts >= (int_in(j[3], 1, MAX_ATTEMPTS) or 1) then
    state = 'failed'
    redis.call('HINCRBY', job_key, 'failed', 1)
    redis.call('ZADD', ctx.failed, now, tid)
  else
    state = 'pending'
    redis.call('HINCRBY', job_key, 'pending', 1)
    redis.call('ZADD', ctx.pending or (ctx.prefix .. 'pending:' .. j[1]), task_score(j[4], j[5], tid), tid)
  end
  redis.call('HDEL', task_key, 'worker', 'worker_name', 'backend', 'host', 'attempt_id',
    'deadline_ms', 'predicted_s')
  redis.call('HSET', task_key, 'state', state, 'attempt_count', attempts, 'last_worker', wid,
    'error_kind', kind, 'error', message)
  local etype = state == 'pending' and 'requeued' or state
  emit(ctx, etype, 'job', job_id, 'task', index_of(tid), 'worker', wid, 'kind', kind,
    'attempt', attempts, 'lease_gen', t[4] or '0', 'error', message)
  if state ~= 'pending' then
    finish_job_if_done(ctx, job_key, job_id, now)
  end
  return state
end

--[[ Takes a worker out of the fleet and releases what it held.
  state: 'lost' (heartbeat expired: attempts burn) or 'stopped' (graceful: they don't).
  held_key: the worker's held set when the caller has it in KEYS.
  Visits at most MAX_APPS of its apps and min(MAX_HELD_VISIT, ctx.budget) held tasks (a
  worker holds a few; the rest of a larger, hand-written set is left: those leases expire
  and are reaped on their own). ctx fields used: alive, budget, plus release's.
  Returns the number of leases released.
]]
local function remove_worker(ctx, wid, now, state, held_key)
  local worker_key = ctx.prefix .. 'worker:' .. wid
  held_key = held_key or (ctx.prefix .. 'held:' .. wid)
  redis.call('ZREM', ctx.alive, wid)
  local w = redis.call('HMGET', worker_key, 'apps', 'name')
  local apps = 0
  for app in string.gmatch(w[1] or '', '[^,]+') do
    apps = apps + 1
    if apps > MAX_APPS then
      break
    end
    redis.call('SREM', ctx.prefix .. 'app:' .. app .. ':workers', wid)
    redis.call('ZREM', ctx.prefix .. 'app:' .. app .. ':fleet', wid)
  end
  local lost = state == 'lost'
  local name = string.sub(w[2] or wid, 1, 200)
  local message = lost and ('worker ' .. name .. ' lost: heartbeat expired') or ''
  local released = 0
  if ctx.budget > 0 then
    local held = redis.call('SRANDMEMBER', held_key, math.min(MAX_HELD_VISIT, ctx.budget))
    for _, tid in ipairs(held) do
      if is_task_id(tid) and redis.call('HGET', ctx.prefix .. 'task:' .. tid, 'worker') == wid
          and release(ctx, tid, now, lost and 'lost' or 'shutdown', message, lost) then
        released = released + 1
      else
        redis.call('SREM', held_key, tid) -- no longer ours (release removes ours)
      end
    end
  end
  ctx.budget = ctx.budget - 1 -- the removal itself counts as one
  if redis.call('EXISTS', worker_key) == 1 then
    redis.call('HSET', worker_key, 'state', state, 'left_ms', int(now), 'busy_until_ms', int(now))
  end
  emit(ctx, lost and 'worker_lost' or 'worker_left', 'worker', wid,
    'name', string.sub(w[2] or '', 1, 200), 'released', released)
  return released
end

--[[ Lazy reaping, bounded by `limit` per kind and by ctx.budget (releases and worker
  removals) in all: lost
  workers first (their leases are released at once), then leases whose deadline passed.
  Nothing during a grace window. ctx fields used: alive, leases, budget, plus release's.
]]
local function reap(ctx, now, grace_until, limit)
  if now < grace_until then
    return 0, 0
  end
  local lost = redis.call('ZRANGEBYSCORE', ctx.alive, '-inf', '(' .. int(now), 'LIMIT', 0, limit)
  local n_lost = 0
  for _, wid in ipairs(lost) do
    if ctx.budget <= 0 then
      break -- the rest is reaped by the next call
    end
    if is_name(wid, 128) then
      remove_worker(ctx, wid, now, 'lost')
      n_lost = n_lost + 1
    else
      redis.call('ZREM', ctx.alive, wid) -- not a worker id (written by hand)
    end
  end
  local expired = {}
  if ctx.budget > 0 then
    expired = redis.call('ZRANGEBYSCORE', ctx.leases, '-inf', '(' .. int(now), 'LIMIT', 0,
      math.min(limit, ctx.budget))
  end
  for _, tid in ipairs(expired) do
    release(ctx, tid, now, 'expired', 'lease expired', true)
  end
  return n_lost, #expired
end
