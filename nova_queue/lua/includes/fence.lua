--[[ fence: checks a worker's report against the task's current attempts.
  t = the task's {state, worker, lease_gen, attempt_id, b_worker, b_lease_gen,
  b_attempt_id} (HMGET in that order; the b_* fields are its backup attempt's, if any).
  Returns CODE.OK and 'primary' or 'backup' when the report holds one of the attempts,
  else the stale code, relative to the primary attempt: NOT_LEASED, WRONG_WORKER,
  LEASE_GEN_MISMATCH, ATTEMPT_MISMATCH (reject_stale records those).
]]
--- @include "common"
local function fence(t, wid, gen, attempt_id)
  if t[1] ~= 'leased' then
    return CODE.NOT_LEASED
  elseif t[5] == wid and t[6] == gen and t[7] == attempt_id then
    return CODE.OK, 'backup'
  elseif t[2] ~= wid then
    return CODE.WRONG_WORKER
  elseif t[3] ~= gen then
    return CODE.LEASE_GEN_MISMATCH
  elseif t[4] ~= attempt_id then
    return CODE.ATTEMPT_MISMATCH
  end
  return CODE.OK, 'primary'
end
