--[[ update_job_counts: the counts of the jobs a claim leased from, one write per job:
  granted[job] tasks move from pending to leased, and a queued job starts running. jobs:
  the counts the candidate scan read (a job being leased from is not cancelled, so nothing
  since changed them); order: the jobs in the order they were first leased from.
]]
--- @include "common"
local function update_job_counts(prefix, jobs, granted, order, now)
  for _, job_id in ipairs(order) do
    local j, n = jobs[job_id], granted[job_id]
    local counts = { 'pending', int((tonumber(j[3]) or 0) - n), 'leased',
      int((tonumber(j[4]) or 0) + n) }
    if j[1] == 'queued' then
      counts[5], counts[6], counts[7], counts[8] = 'state', 'running', 'started_ms', int(now)
    end
    redis.call('HSET', prefix .. 'job:' .. job_id, unpack(counts))
  end
end
