--[[ release: ends a lease without a commit (failure, expiry, lost worker, shutdown).
  The task goes back to pending, or to failed when its attempts are used up, or to
  cancelled when its job was cancelled. `burn` = false gives the attempt back.
  ctx fields used: prefix, leases, inflight, failed, events, maxlen, finished, and
  pending when the caller passed the task's pending key in KEYS.
  Returns the task's new state, or nil if it was not leased.
]]
local function release(ctx, tid, now, kind, message, burn)
  local task_key = ctx.prefix .. 'task:' .. tid
  local t = redis.call('HMGET', task_key, 'state', 'worker', 'attempt_count', 'lease_gen')
  redis.call('ZREM', ctx.leases, tid)
  if t[1] ~= 'leased' then
    return nil
  end
  local job_id = job_of(tid)
  local job_key = ctx.prefix .. 'job:' .. job_id
  local j = redis.call('HMGET', job_key, 'app', 'state', 'max_attempts', 'priority', 'seq0')
  local wid = t[2] or ''
  redis.call('SREM', ctx.prefix .. 'held:' .. wid, tid)
  redis.call('HINCRBY', ctx.inflight, j[1], -1)
  redis.call('HINCRBY', job_key, 'leased', -1)
  local attempts = tonumber(t[3]) or 0
  if not burn and attempts > 0 then
    attempts = attempts - 1
  end
  local state
  if j[2] == 'cancelled' then
    state = 'cancelled'
    redis.call('HINCRBY', job_key, 'cancelled', 1)
  elseif burn and attempts >= (tonumber(j[3]) or 1) then
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
  held_key / hb_key: the worker's keys when the caller has them in KEYS.
  ctx fields used: alive, plus release's.
]]
local function remove_worker(ctx, wid, now, state, held_key, hb_key)
  local worker_key = ctx.prefix .. 'worker:' .. wid
  held_key = held_key or (ctx.prefix .. 'held:' .. wid)
  hb_key = hb_key or (ctx.prefix .. 'hb:' .. wid)
  redis.call('ZREM', ctx.alive, wid)
  local w = redis.call('HMGET', worker_key, 'apps', 'name')
  for app in string.gmatch(w[1] or '', '[^,]+') do
    redis.call('SREM', ctx.prefix .. 'app:' .. app .. ':workers', wid)
    redis.call('ZREM', ctx.prefix .. 'app:' .. app .. ':fleet', wid)
  end
  local held = redis.call('SMEMBERS', held_key)
  local lost = state == 'lost'
  local message = lost and ('worker ' .. (w[2] or wid) .. ' lost: heartbeat expired') or ''
  for _, tid in ipairs(held) do
    if redis.call('HGET', ctx.prefix .. 'task:' .. tid, 'worker') == wid then
      release(ctx, tid, now, lost and 'lost' or 'shutdown', message, lost)
    end
  end
  redis.call('DEL', held_key, hb_key)
  if redis.call('EXISTS', worker_key) == 1 then
    redis.call('HSET', worker_key, 'state', state, 'left_ms', int(now), 'busy_until_ms', int(now))
  end
  emit(ctx, lost and 'worker_lost' or 'worker_left', 'worker', wid, 'name', w[2] or '',
    'released', #held)
  return #held
end

--[[ Lazy reaping, bounded by `limit` per kind: lost workers first (their leases are
  released at once), then leases whose deadline passed. Nothing during a grace window.
  ctx fields used: alive, leases, plus release's.
]]
local function reap(ctx, now, grace_until, limit)
  if now < grace_until then
    return 0, 0
  end
  local lost = redis.call('ZRANGEBYSCORE', ctx.alive, '-inf', '(' .. int(now), 'LIMIT', 0, limit)
  for _, wid in ipairs(lost) do
    remove_worker(ctx, wid, now, 'lost')
  end
  local expired = redis.call('ZRANGEBYSCORE', ctx.leases, '-inf', '(' .. int(now), 'LIMIT', 0, limit)
  for _, tid in ipairs(expired) do
    release(ctx, tid, now, 'expired', 'lease expired', true)
  end
  return #lost, #expired
end
