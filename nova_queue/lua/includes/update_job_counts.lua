--[[ update_job_counts: the counts of the jobs a claim leased from, one write per job:
  granted[job] tasks move from pending to leased, and a queued job starts running. jobs:
  the candidate scan's CLAIM_JOB reads (a job being leased from is not cancelled, so
  nothing since changed its counts); order: the jobs in the order they were first leased
  from.
]]
--- @include "common"
local function update_job_counts(prefix, jobs, granted, order, now)
  for _, job_id in ipairs(order) do
    local j, n = jobs[job_id], granted[job_id]
    local pending = int((tonumber(j[CLAIM_JOB.pending]) or 0) - n)
    local leased = int((tonumber(j[CLAIM_JOB.leased]) or 0) + n)
    if j[CLAIM_JOB.state] == 'queued' then
      redis.call('HSET', prefix .. 'job:' .. job_id, 'pending', pending, 'leased', leased,
        'state', 'running', 'started_ms', int(now))
    else
      redis.call('HSET', prefix .. 'job:' .. job_id, 'pending', pending, 'leased', leased)
    end
  end
end
