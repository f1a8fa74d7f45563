--[[ reap: lazy reaping, bounded by `limit` per kind and by ctx.budget (releases and worker
  removals) in all: lost workers first (their leases are released at once), then leases
  whose deadline passed (expire_lease: past its run deadline, an attempt times out).
  Nothing during a grace window. Returns workers lost, leases
  expired. ctx fields used: alive, leases, budget, plus release's.
]]
--- @include "remove_worker"
--- @include "expire_lease"
local function reap(ctx, now, grace_until, limit)
  if now < grace_until then
    return 0, 0
  end
  local lost = redis.call('ZRANGEBYSCORE', ctx.alive, '-inf', '(' .. int(now), 'LIMIT', '0',
    int(limit))
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
    expired = redis.call('ZRANGEBYSCORE', ctx.leases, '-inf', '(' .. int(now), 'LIMIT', '0',
      int(math.min(limit, ctx.budget)))
  end
  for _, tid in ipairs(expired) do
    expire_lease(ctx, tid, now)
  end
  return n_lost, #expired
end
