--[[ fence: checks a worker's report against the task's current lease.
  t = the task's {state, worker, lease_gen, attempt_id} (HMGET in that order).
  Returns CODE.OK when the report holds the lease, else the stale code: NOT_LEASED,
  WRONG_WORKER, LEASE_GEN_MISMATCH, ATTEMPT_MISMATCH (reject_stale records those).
]]
--- @include "common"
local function fence(t, wid, gen, attempt_id)
  if t[1] ~= 'leased' then
    return CODE.NOT_LEASED
  elseif t[2] ~= wid then
    return CODE.WRONG_WORKER
  elseif t[3] ~= gen then
    return CODE.LEASE_GEN_MISMATCH
  elseif t[4] ~= attempt_id then
    return CODE.ATTEMPT_MISMATCH
  end
  return CODE.OK
end
