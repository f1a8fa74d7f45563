--[[ gather_job: candidates from one job (j: consider_job's fields), up to k in all: the
  pending members in its score range, k + 32 at most, each decided by consider_pending.
  Returns how many members the range held (0: none of its tasks is pending now).
]]
--- @include "consider_pending"
local function gather_job(ctx, K, a, s, job_id, j, now)
  local last = int_in(j[9], 1, MAX_JOB_TASKS) or 1
  local members = redis.call('ZRANGEBYSCORE', K.pending, task_score(j[7], j[8], job_id .. ':0'),
    task_score(j[7], j[8], job_id .. ':' .. int(last - 1)), 'LIMIT', '0',
    int(a.k - #s.tids + 32))
  for _, tid in ipairs(members) do
    if #s.tids >= a.k then
      break
    end
    if job_of(tid) == job_id then
      consider_pending(ctx, K, a, s, tid, now)
    end
  end
  return #members
end
