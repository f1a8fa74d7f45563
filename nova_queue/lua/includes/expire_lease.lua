--[[ expire_lease: a task in the lease set whose score (the earlier deadline of its
  attempts) passed. Each attempt whose own deadline passed ends: at its run deadline as a
  timeout (time_out), else as expired (its worker stopped renewing; an attempt is used).
  With one attempt left the task stays leased. ctx: as release's.
]]
--- @include "time_out"
local function expire_lease(ctx, tid, now)
  local t = is_task_id(tid) and redis.call('HMGET', ctx.prefix .. 'task:' .. tid, 'state',
    'worker', 'deadline_ms', 'run_deadline_ms', 'claimed_ms', 'b_worker', 'b_deadline_ms',
    'b_run_deadline_ms', 'b_claimed_ms')
  if not t or t[1] ~= 'leased' or not t[2] then
    release(ctx, tid, now, 'expired', 'lease expired', true) -- drops what is not a lease
    return
  end
  local attempts = { { t[2], t[3], t[4], t[5] } }
  if t[6] then
    attempts[2] = { t[6], t[7], t[8], t[9] }
  end
  local next_deadline = math.huge
  for _, at in ipairs(attempts) do
    local deadline = tonumber(at[2]) or 0
    if deadline > now then
      next_deadline = math.min(next_deadline, deadline)
    elseif (tonumber(at[3]) or math.huge) <= now then
      time_out(ctx, tid, at[1], now, at[4])
    else
      release_attempt(ctx, tid, at[1], now, 'expired', 'lease expired', true)
    end
  end
  if #attempts == 1 or next_deadline == math.huge then
    return
  end
  -- one attempt runs on, or the score was behind the deadlines: keep the task's lease
  redis.call('ZADD', ctx.leases, 'XX', next_deadline, tid)
end
