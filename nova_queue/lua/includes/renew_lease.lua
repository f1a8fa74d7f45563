--[[ renew_lease: extends worker wid's attempt (gen, attempt_id: primary or backup) at task
  tid to `deadline`, never past the attempt's run deadline; an attempt at its run deadline
  times out (time_out). Returns true, or false and why the worker no longer holds it:
  'timeout', 'superseded' (the task was committed, by another attempt), 'cancelled' (its
  job was), the kind its lease ended with ('expired', 'lost', 'timeout', ...), or 'lost'.
  ctx: as release's.
]]
--- @include "fence"
--- @include "time_out"
local function renew_lease(ctx, tid, wid, gen, attempt_id, now, deadline)
  local task_key = ctx.prefix .. 'task:' .. tid
  local t = redis.call('HMGET', task_key, unpack(RENEW_TASK))
  local code, which = fence(task_key, t, wid, gen, attempt_id)
  if code ~= CODE.OK then
    if t[RENEW_TASK.state] == 'done' then
      return false, 'superseded'
    end
    return false, (t[RENEW_TASK.last_worker] == wid and t[RENEW_TASK.error_kind]) or 'lost'
  end
  if redis.call('HGET', ctx.prefix .. 'job:' .. job_of(tid), 'state') == 'cancelled' then
    return false, 'cancelled'
  end
  local backup = which == 'backup'
  local run_deadline = tonumber(backup and t[RENEW_TASK.b_run_deadline_ms]
    or t[RENEW_TASK.run_deadline_ms]) or math.huge
  if run_deadline <= now then
    time_out(ctx, tid, wid, now, backup and t[RENEW_TASK.b_claimed_ms] or t[RENEW_TASK.claimed_ms])
    return false, 'timeout'
  end
  local d = math.min(deadline, run_deadline)
  redis.call('HSET', task_key, backup and 'b_deadline_ms' or 'deadline_ms', int(d))
  -- the lease set holds the earlier deadline of the task's attempts
  local other = backup and t[RENEW_TASK.deadline_ms] or t[RENEW_TASK.b_deadline_ms]
  redis.call('ZADD', ctx.leases, 'XX', math.min(d, tonumber(other) or d), tid)
  return true
end
