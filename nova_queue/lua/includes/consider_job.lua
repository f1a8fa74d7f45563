--[[ consider_job: a job's fields as the candidate scan needs them, read once per claim:
  {state, params, pending, leased, timeout_s, requires, priority, seq0, total, model,
  owner} (s.jobs caches them; drop_task and write_leases keep the counts current).
]]
--- @include "common"
local function consider_job(ctx, s, job_id)
  local j = s.jobs[job_id]
  if not j then
    j = redis.call('HMGET', ctx.prefix .. 'job:' .. job_id, 'state', 'params', 'pending', 'leased',
      'timeout_s', 'requires', 'priority', 'seq0', 'total', 'model', 'owner')
    s.jobs[job_id] = j
  end
  return j
end
