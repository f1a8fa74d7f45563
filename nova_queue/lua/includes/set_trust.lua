--[[ set_trust: a registering worker's trust. Asked 'trusted' (the operator vouches for
  it), or with nothing asked (a release before trust levels), it is trusted: its hash has
  no `trust` and no result of it is verified (no field is written for it: every field of a
  worker hash lengthens the claim's and commit's reads of the others). Anything else: its
  identity's record (trust:<ident>, made 'new' on its first registration) decides:
  'earned' after TRUST_AFTER agreements in a row, else 'new'. The record outlives every
  worker id of the identity: re-registering resets nothing.
]]
--- @include "common"
local function set_trust(prefix, worker_key, wid, requested)
  if requested == nil or requested == 'trusted' then
    redis.call('HDEL', worker_key, 'trust')
    return
  end
  local key = prefix .. 'trust:' .. ident_of(wid)
  redis.call('HSETNX', key, 'level', 'new')
  local level = redis.call('HGET', key, 'level')
  redis.call('HSET', worker_key, 'trust', level == 'earned' and 'earned' or 'new')
end
