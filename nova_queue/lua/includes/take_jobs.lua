--[[ take_jobs: candidates from `jobs` ({job id, consider_job's fields or false: not read
  yet} pairs) in that order, from each one this worker may take (job_eligible), until the
  claim has k (gather_job). Returns the jobs whose ranges held no pending task, or whose
  ids are not job ids (their owners' queues may drop them).
]]
--- @include "gather_job"
--- @include "job_eligible"
--- @include "consider_job"
local function take_jobs(ctx, K, a, me, s, jobs, now)
  local empty = {}
  for _, p in ipairs(jobs) do
    if #s.tids >= a.k then
      break
    end
    local j = p[2] or (is_job_id(p[1]) and consider_job(ctx, s, p[1]))
    if not j or not j[1] or j[1] == 'done' or j[1] == 'failed' or j[1] == 'cancelled' then
      empty[#empty + 1] = p[1]
    elseif job_eligible(j, me) and gather_job(ctx, K, a, s, p[1], j, now) == 0 then
      empty[#empty + 1] = p[1]
    end
  end
  return empty
end
