--[[ live_verifiers: whether a live worker of the app (its worker set: live, not
  quarantined) verifies others' results (`verifier` 1), and whether a trusted one does.
  Looks at MAX_VERIFIER_VISIT workers at most: with more, a verifier is assumed.
]]
--- @include "common"
local function live_verifiers(prefix, app_workers_key)
  if redis.call('SCARD', app_workers_key) > MAX_VERIFIER_VISIT then
    return true, true
  end
  local any, trusted = false, false
  for _, wid in ipairs(redis.call('SMEMBERS', app_workers_key)) do
    local verifier, trust = unpack(redis.call('HMGET', prefix .. 'worker:' .. wid, 'verifier',
      'trust'))
    if verifier == '1' then
      any = true
      trusted = trusted or trust ~= 'new'
    end
  end
  return any, trusted
end
