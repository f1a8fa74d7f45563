--[[ expire_lease: a task in the lease set whose score (the earlier deadline of its
  attempts) passed. Each attempt whose own deadline passed ends: at its run deadline as a
  timeout (time_out), else as expired (its worker stopped renewing; an attempt is used).
  With one attempt left the task stays leased. ctx: as release's.
]]
--- @include "time_out"
local function expire_lease(ctx, tid, now)
  local state, worker, deadline_ms, run_deadline_ms, claimed_ms, b_worker, b_deadline_ms,
    b_run_deadline_ms, b_claimed_ms = unpack(is_task_id(tid) and redis.call('HMGET',
    ctx.prefix .. 'task:' .. tid, 'state', 'worker', 'deadline_ms', 'run_deadline_ms',
    'claimed_ms', 'b_worker', 'b_deadline_ms', 'b_run_deadline_ms', 'b_claimed_ms') or {})
  if state ~= 'leased' or not worker then
    release(ctx, tid, now, 'expired', 'lease expired', true) -- drops what is not a lease
    return
  end
  -- its attempts: the primary, and the backup when it has one
  local workers, claimed = { worker, b_worker }, { claimed_ms, b_claimed_ms }
  local deadlines = { deadline_ms, b_deadline_ms }
  local run_deadlines = { run_deadline_ms, b_run_deadline_ms }
  local attempts, next_deadline = b_worker and 2 or 1, math.huge
  for i = 1, attempts do
    local deadline = tonumber(deadlines[i]) or 0
    if deadline > now then
      next_deadline = math.min(next_deadline, deadline)
    elseif (tonumber(run_deadlines[i]) or math.huge) <= now then
      time_out(ctx, tid, workers[i], now, claimed[i])
    else
      release_attempt(ctx, tid, workers[i], now, 'expired', 'lease expired', true)
    end
  end
  if attempts == 1 or next_deadline == math.huge then
    return
  end
  -- one attempt runs on, or the score was behind the deadlines: keep the task's lease
  redis.call('ZADD', ctx.leases, 'XX', next_deadline, tid)
end
