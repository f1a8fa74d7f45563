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
  local t = redis.call('HMGET', task_key, 'state', 'worker', 'lease_gen', 'attempt_id',
    'b_worker', 'b_lease_gen', 'b_attempt_id', 'run_deadline_ms', 'b_run_deadline_ms',
    'claimed_ms', 'b_claimed_ms', 'deadline_ms', 'b_deadline_ms', 'last_worker', 'error_kind')
  local code, which = fence(t, wid, gen, attempt_id)
  if code ~= CODE.OK then
    if t[1] == 'done' then
      return false, 'superseded'
    end
    return false, (t[14] == wid and t[15]) or 'lost'
  end
  if redis.call('HGET', ctx.prefix .. 'job:' .. job_of(tid), 'state') == 'cancelled' then
    return false, 'cancelled'
  end
  local backup = which == 'backup'
  local run_deadline = tonumber(backup and t[9] or t[8]) or math.huge
  if run_deadline <= now then
    time_out(ctx, tid, wid, now, backup and t[11] or t[10])
    return false, 'timeout'
  end
  local d = math.min(deadline, run_deadline)
  redis.call('HSET', task_key, backup and 'b_deadline_ms' or 'deadline_ms', int(d))
  -- the lease set holds the earlier deadline of the task's attempts
  redis.call('ZADD', ctx.leases, 'XX', math.min(d, tonumber(backup and t[12] or t[13]) or d), tid)
  return true
end
