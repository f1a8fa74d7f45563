--[[ walk_pending: candidates in queue order, one owner's or when owners do not matter: it
  walks the pending set job by job: the first k + 32 members from where it stands; the
  first one's job is considered (members that are not tasks leave the set on the way), and
  its members in reach are taken if this worker may take the job (job_eligible: not
  staging, requirements its labels meet) and each task (consider_pending). While it has
  fewer than k, the walk jumps past that job's score range (a job's tasks share one:
  priority, then its block of seq) to the next job; at most MAX_JOB_VISIT jobs. When the
  head job needs a model this worker does not hold warm, the first 8 jobs are taken in
  prefer_model's order instead (take_jobs).
]]
--- @include "consider_job"
--- @include "consider_pending"
--- @include "job_eligible"
--- @include "job_heads"
--- @include "prefer_model"
--- @include "take_jobs"
local function walk_pending(ctx, K, a, me, s, now)
  local from = '-inf'
  for visit = 1, MAX_JOB_VISIT do
    local scan = redis.call('ZRANGEBYSCORE', K.pending, from, '+inf', 'LIMIT', '0', int(a.k + 32))
    local job_id, j, eligible
    for _, tid in ipairs(scan) do
      local of = #tid <= 80 and job_of(tid)
      if not job_id and of then
        job_id, j = of, consider_job(ctx, s, of)
        local model = j[CLAIM_JOB.model]
        if visit == 1 and model and model ~= '' and model ~= me.warm then
          return take_jobs(ctx, K, a, me, s, prefer_model(ctx.prefix, a.app, me, s,
            job_heads(ctx, K, s, 8)), now)
        end
        eligible = job_eligible(j, me)
      end
      if of ~= job_id or #s.tids >= a.k then
        if job_id then
          break
        end
        consider_pending(ctx, K, a, s, tid, now) -- not a task: it leaves the set
      elseif eligible then
        consider_pending(ctx, K, a, s, tid, now)
      end
    end
    if #s.tids >= a.k or not job_id then
      break -- enough, or nothing left (or only what was just removed)
    end
    -- past the job's range: the score of its last task, from its (writable) fields
    from = '(' .. task_score(j[CLAIM_JOB.priority], j[CLAIM_JOB.seq0], job_id .. ':'
      .. int((int_in(j[CLAIM_JOB.total], 1, MAX_JOB_TASKS) or 1) - 1))
  end
end
