--[[ consider_job: a job's CLAIM_JOB fields, what the candidate scan weighs of it, read once
  per claim (s.jobs caches them; drop_task and write_leases keep the counts current).
]]
--- @include "common"
local function consider_job(ctx, s, job_id)
  local j = s.jobs[job_id]
  if not j then
    j = redis.call('HMGET', ctx.prefix .. 'job:' .. job_id, unpack(CLAIM_JOB))
    s.jobs[job_id] = j
  end
  return j
end
