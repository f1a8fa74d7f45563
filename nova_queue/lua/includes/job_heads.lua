--[[ job_heads: the jobs at the head of the pending set, in queue order, from its first
  member on: each found by one ZRANGEBYSCORE past the one before (a job's tasks share one
  score range), at most `n`. Returns their ids (their CLAIM_JOB reads in s.jobs:
  consider_job); members that are not tasks of a job end the list.
]]
--- @include "consider_job"
local function job_heads(ctx, K, s, n)
  local heads, from = {}, '-inf'
  for _ = 1, n do
    local first = redis.call('ZRANGEBYSCORE', K.pending, from, '+inf', 'LIMIT', 0, 1)[1]
    local job_id = first and #first <= 80 and job_of(first)
    if not job_id then
      break
    end
    local j = consider_job(ctx, s, job_id)
    heads[#heads + 1] = job_id
    from = '(' .. task_score(j[CLAIM_JOB.priority], j[CLAIM_JOB.seq0], job_id .. ':'
      .. int((int_in(j[CLAIM_JOB.total], 1, MAX_JOB_TASKS) or 1) - 1))
  end
  return heads
end
