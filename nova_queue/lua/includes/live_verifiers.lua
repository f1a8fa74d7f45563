--[[ live_verifiers: the live workers of the app (its worker set: live, not quarantined)
  that verify others' results (`verifier` 1), each {ident, owner (its hash's `owner`, else
  its identity), vouched (no `trust` field: the operator vouches for it)}; nil when the app
  has more than MAX_VERIFIER_VISIT workers (not looked at: a verifier is assumed).
  may_verify weighs them.
]]
--- @include "common"
local function live_verifiers(prefix, app_workers_key)
  if redis.call('SCARD', app_workers_key) > MAX_VERIFIER_VISIT then
    return nil
  end
  local out = {}
  for _, wid in ipairs(redis.call('SMEMBERS', app_workers_key)) do
    local verifier, trust, owner = unpack(redis.call('HMGET', prefix .. 'worker:' .. wid,
      'verifier', 'trust', 'owner'))
    if verifier == '1' then
      out[#out + 1] = { ident = ident_of(wid), owner = owner or ident_of(wid), vouched = not trust }
    end
  end
  return out
end
