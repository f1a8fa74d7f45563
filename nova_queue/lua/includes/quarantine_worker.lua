--[[ quarantine_worker: stops worker wid from claiming. It leaves its apps' worker sets and
  fleets (other workers' claims no longer count on it, and the tasks it failed go to
  others), stays registered and heartbeating, and is let back after cooldown_ms with one
  probe task (quarantine_gate) or at once by an admin (quarantine-6). The attempts of its
  failure streak go back to their tasks (refund_attempts): one broken worker never fails a
  task. A worker quarantined again (its probe failed) stays out cooldown_ms from now.
  Emits worker_quarantined. ctx fields used: prefix, failed, finished, events, maxlen.
  Returns the number of tasks that got an attempt back.
]]
--- @include "refund_attempts"
--- @include "worker_apps"
local function quarantine_worker(ctx, wid, now, reason, cooldown_ms)
  local worker_key = ctx.prefix .. 'worker:' .. wid
  local apps, name, streak_tids = unpack(redis.call('HMGET', worker_key, 'apps', 'name',
    'streak_tids'))
  for _, app in ipairs(worker_apps(apps)) do
    redis.call('SREM', ctx.prefix .. 'app:' .. app .. ':workers', wid)
    redis.call('ZREM', ctx.prefix .. 'app:' .. app .. ':fleet', wid)
  end
  cooldown_ms = math.floor(math.min(math.max(cooldown_ms, 1), MAX_COOLDOWN_MS))
  reason = string.sub(reason or '', 1, MAX_TEXT_BYTES)
  local refunded = refund_attempts(ctx, wid, streak_tids, now)
  redis.call('HSET', worker_key, 'quarantined', '1', 'quarantine_reason', reason,
    'quarantined_ms', int(now), 'quarantine_until_ms', int(now + cooldown_ms),
    'cooldown_ms', int(cooldown_ms), 'streak_tids', '', 'fast_streak', 0)
  redis.call('HDEL', worker_key, 'probe_tid')
  emit(ctx, 'worker_quarantined', 'worker', wid, 'name', string.sub(name or '', 1, 200),
    'reason', reason, 'until_ms', int(now + cooldown_ms), 'refunded', refunded)
  return refunded
end
