--[[ fence: checks a worker's report against the task's current attempts. t: the task's
  LEASE fields (the first fields of every read of a task that a report is fenced by:
  COMMIT_TASK, RENEW_TASK, FAIL_TASK); the backup attempt's lease_gen and attempt id are
  read here, and only when the reporting worker runs the backup attempt (b_worker), so a
  task without a backup costs no read of fields it lacks.
  Returns CODE.OK and 'primary' or 'backup' when the report holds one of the attempts,
  else the stale code, relative to the primary attempt: NOT_LEASED, WRONG_WORKER,
  LEASE_GEN_MISMATCH, ATTEMPT_MISMATCH (reject_stale records those).
]]
--- @include "common"
local function fence(task_key, t, wid, gen, attempt_id)
  if t[LEASE.state] ~= 'leased' then
    return CODE.NOT_LEASED
  end
  if t[LEASE.b_worker] == wid then
    local b_lease_gen, b_attempt_id = unpack(redis.call('HMGET', task_key, 'b_lease_gen',
      'b_attempt_id'))
    if b_lease_gen == gen and b_attempt_id == attempt_id then
      return CODE.OK, 'backup'
    end
  end
  if t[LEASE.worker] ~= wid then
    return CODE.WRONG_WORKER
  elseif t[LEASE.lease_gen] ~= gen then
    return CODE.LEASE_GEN_MISMATCH
  elseif t[LEASE.attempt_id] ~= attempt_id then
    return CODE.ATTEMPT_MISMATCH
  end
  return CODE.OK, 'primary'
end
