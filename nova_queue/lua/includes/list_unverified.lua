--[[ list_unverified: task tid, whose result worker wid's identity committed at `score` (ms),
  stands unverified: it joins unverified:<ident>, which keeps the identity's latest
  MAX_UNVERIFIED (catch_ident re-runs them if the identity is caught).
]]
--- @include "common"
local function list_unverified(prefix, wid, tid, score)
  local list = prefix .. 'unverified:' .. ident_of(wid)
  redis.call('ZADD', list, score, tid)
  if redis.call('ZCARD', list) > MAX_UNVERIFIED then -- its latest ones only
    redis.call('ZREM', list, unpack(redis.call('ZRANGE', list, 0, 0)))
  end
end
