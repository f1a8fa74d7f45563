--[[ tick: detects that no script ran for longer than gap_ms (Redis was down or
  unreachable) and then opens a grace window of one lease TTL in which nothing is
  reaped, so live holders can renew before their leases count as expired. First it checks
  the namespace's protocol version (check_protocol), one field more in the same read: claim,
  renew and reap refuse a namespace of another protocol before they write anything.
  ctx fields used: meta.
]]
--- @include "common"
--- @include "check_protocol"
local function tick(ctx, now, gap_ms, ttl_ms)
  local last_tick_ms, grace_until_ms, protocol = unpack(redis.call('HMGET', ctx.meta,
    'last_tick_ms', 'grace_until_ms', 'protocol'))
  check_protocol(ctx.meta, protocol)
  local last = tonumber(last_tick_ms) or 0
  local grace = tonumber(grace_until_ms) or 0
  if last > 0 and now - last > gap_ms and now + ttl_ms > grace then
    grace = now + ttl_ms
    redis.call('HSET', ctx.meta, 'grace_until_ms', int(grace))
    emit(ctx, 'grace', 'gap_ms', int(now - last), 'until_ms', int(grace))
  end
  -- at most one write per 100 ms: gaps that matter are >= half a lease TTL (>= 1 s)
  if now >= last + 100 then
    redis.call('HSET', ctx.meta, 'last_tick_ms', int(now))
  end
  return grace
end
