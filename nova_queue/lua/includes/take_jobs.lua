--[[ take_jobs: candidates from `jobs` (job ids, in that order; one not read yet is read
  here: consider_job) from each one this worker may take (job_eligible), until the claim
  has k: the pending members in the job's score range, k + 32 at most, each decided by
  consider_pending. Returns the jobs whose ranges held no pending task, or whose ids are
  not job ids (their owners' queues may drop them).
]]
--- @include "consider_pending"
--- @include "job_eligible"
--- @include "consider_job"
local function take_jobs(ctx, K, a, me, s, jobs, now)
  local empty = {}
  for _, job_id in ipairs(jobs) do
    if #s.tids >= a.k then
      break
    end
    local j = s.jobs[job_id] or (is_job_id(job_id) and consider_job(ctx, s, job_id))
    if not j or not j[CLAIM_JOB.state] or is_finished(j[CLAIM_JOB.state]) then
      empty[#empty + 1] = job_id
    elseif job_eligible(j, me) then
      local priority, seq0 = j[CLAIM_JOB.priority], j[CLAIM_JOB.seq0]
      local last = int_in(j[CLAIM_JOB.total], 1, MAX_JOB_TASKS) or 1
      local members = redis.call('ZRANGEBYSCORE', K.pending,
        task_score(priority, seq0, job_id .. ':0'),
        task_score(priority, seq0, job_id .. ':' .. int(last - 1)), 'LIMIT', '0',
        int(a.k - #s.tids + 32))
      for _, tid in ipairs(members) do
        if #s.tids >= a.k then
          break
        end
        if job_of(tid) == job_id then
          consider_pending(ctx, K, a, s, tid, now)
        end
      end
      if #members == 0 then
        empty[#empty + 1] = job_id
      end
    end
  end
  return empty
end
