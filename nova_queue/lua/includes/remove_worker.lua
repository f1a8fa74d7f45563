--[[ remove_worker: takes a worker out of the fleet and releases what it held.
  state: 'lost' (heartbeat expired: attempts burn) or 'stopped' (graceful: they don't, but
  for a task handed back that way too often while others succeed: free_hand_back).
  held_key: the worker's held set when the caller has it in KEYS.
  Visits at most MAX_APPS of its apps and min(MAX_HELD_VISIT, ctx.budget) held tasks (a
  worker holds a few; the rest of a larger, hand-written set is left: those leases expire
  and are reaped on their own). A task it runs as one of two attempts goes on with the
  other (release_attempt). It enters `departed` (scored by now; a key built from the prefix,
  as the claim path's KEYS stay as they are), from which the retention sweep (expire-10)
  forgets it once it has been gone NOVA_JOB_RETENTION_S. ctx fields used: alive, budget,
  plus release's. Returns the number of leases released.
]]
--- @include "release_attempt"
--- @include "free_hand_back"
--- @include "members_upto"
--- @include "set_warm"
--- @include "worker_apps"
local function remove_worker(ctx, wid, now, state, held_key)
  local worker_key = ctx.prefix .. 'worker:' .. wid
  held_key = held_key or (ctx.prefix .. 'held:' .. wid)
  redis.call('ZREM', ctx.alive, wid)
  local apps, name = unpack(redis.call('HMGET', worker_key, 'apps', 'name'))
  for _, app in ipairs(worker_apps(apps)) do
    redis.call('SREM', ctx.prefix .. 'app:' .. app .. ':workers', wid)
    redis.call('ZREM', ctx.prefix .. 'app:' .. app .. ':fleet', wid)
    set_warm(ctx.prefix, app, worker_key, redis.call('HGET', worker_key, 'warm:' .. app), '')
  end
  local lost = state == 'lost'
  local message = lost and ('worker ' .. string.sub(name or wid, 1, 200) .. ' lost: heartbeat '
    .. 'expired') or ''
  local released = 0
  if ctx.budget > 0 then
    local held = members_upto(held_key, math.min(MAX_HELD_VISIT, ctx.budget))
    for _, tid in ipairs(held) do
      local worker, b_worker = unpack(is_task_id(tid) and redis.call('HMGET',
        ctx.prefix .. 'task:' .. tid, 'worker', 'b_worker') or {})
      local ours = worker == wid or b_worker == wid
      local burn = ours and (lost or not free_hand_back(ctx, tid, wid, now))
      if ours and release_attempt(ctx, tid, wid, now, lost and 'lost' or 'shutdown', message,
          burn) then
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
  redis.call('ZADD', ctx.prefix .. 'departed', now, wid)
  emit(ctx, lost and 'worker_lost' or 'worker_left', 'worker', wid,
    'name', string.sub(name or '', 1, 200), 'released', released)
  return released
end
