--[[ still_claiming: whether other workers' claims count on worker wid: it claimed since
  `since` (claim_ms, WAIT answers included), or it runs what it claimed (its held set is not
  empty) and is within its predicted run (busy_until_ms, also since `since`). Registering,
  or a heartbeat, is not enough: a worker that never claims holds no one back.
]]
--- @include "common"
local function still_claiming(prefix, wid, claim_ms, busy_until_ms, since)
  if (num_in(claim_ms, 0, 1e15) or -1) >= since then
    return true
  end
  return (num_in(busy_until_ms, 0, 1e15) or -1) >= since
    and redis.call('SCARD', prefix .. 'held:' .. wid) > 0
end
