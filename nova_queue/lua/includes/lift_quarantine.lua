--[[ lift_quarantine: lets quarantined worker wid claim again: if it is alive it rejoins its
  apps' worker sets and fleets (enter_fleet); its failure streak starts afresh and its next
  quarantine has the base cool-down again. by: 'probe' (its probe task committed) or
  'admin'. Emits worker_released. ctx fields used: prefix, alive, events, maxlen.
]]
--- @include "enter_fleet"
--- @include "worker_apps"
local function lift_quarantine(ctx, wid, now, by)
  local worker_key = ctx.prefix .. 'worker:' .. wid
  local apps, name = unpack(redis.call('HMGET', worker_key, 'apps', 'name'))
  redis.call('HDEL', worker_key, 'quarantined', 'quarantine_reason', 'quarantined_ms',
    'quarantine_until_ms', 'probe_tid', 'cooldown_ms')
  redis.call('HSET', worker_key, 'fail_streak', 0, 'fast_streak', 0, 'blamed', 0,
    'streak_tids', '', 'streak_since_ms', '')
  if redis.call('ZSCORE', ctx.alive, wid) then
    for _, app in ipairs(worker_apps(apps)) do
      enter_fleet(ctx.prefix, worker_key, wid, app)
    end
  end
  emit(ctx, 'worker_released', 'worker', wid, 'name', string.sub(name or '', 1, 200), 'by', by)
end
