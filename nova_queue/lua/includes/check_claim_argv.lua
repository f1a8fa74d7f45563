--[[ check_claim_argv: what is wrong with a claim's named arguments (claim_argv), or nil.
  Reads and writes nothing (complete_claim-15 calls it before its commit).
]]
--- @include "common"
local function check_claim_argv(a)
  local ids = a.attempt_ids
  -- the worker id needs no pattern: only a registered worker (register checks it) claims
  if #ids == 0 or #a.wid > 128 or #a.app > 64 then
    return 'invalid worker id or app name'
  end
  if not a.k or not a.ttl_ms or not a.gap_ms or not a.maxlen or not a.reap_limit then
    return 'k (1..' .. MAX_CLAIM_K .. '), lease TTL, gap, events MAXLEN or reap limit out of range'
  end
  if not a.timeout_floor_ms or not a.timeout_factor then
    return 'run-time limit floor (1..' .. MAX_TIMEOUT_MS .. ' ms) or factor (1..1000) out of range'
  end
  if #ids < a.k or #ids > MAX_CLAIM_K then
    return 'a claim of k tasks needs k to ' .. MAX_CLAIM_K .. ' attempt ids'
  end
  for _, id in ipairs(ids) do
    if not is_attempt_id(id) then
      return 'invalid attempt id'
    end
  end
  return nil
end
