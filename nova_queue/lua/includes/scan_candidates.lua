--[[ scan_candidates: up to k tasks a claim may lease, in queue order. It walks the pending
  set job by job: the first k + 32 members from where it stands; the first one's job is
  considered (members that are not tasks leave the set on the way), and its members in
  reach are taken if this worker may take the job (job_eligible: not staging, requirements
  its labels meet) and each task (consider_pending). While it has fewer than k, the walk
  jumps past that job's score range (a job's tasks share one: priority, then its block of
  seq) to the next job; at most MAX_JOB_VISIT jobs. Returns s:
  tids, tasks (each the task's {cost, oom, input, lease_gen, attempt_count, state, gen_top,
  failed_on, oom_memory, oom_batch}), costs, jobs (job id -> consider_job's fields), job
  (the first candidate's job id) and removed (members that left the set).
]]
--- @include "consider_job"
--- @include "consider_pending"
--- @include "job_eligible"
local function scan_candidates(ctx, K, a, me, now)
  local s = { tids = {}, tasks = {}, costs = {}, jobs = {}, removed = 0, live = nil,
    memory = num_in(me.memory, 0, 1e18) }
  local from = '-inf'
  for _ = 1, MAX_JOB_VISIT do
    local scan = redis.call('ZRANGEBYSCORE', K.pending, from, '+inf', 'LIMIT', 0, a.k + 32)
    local job_id, j, eligible
    for _, tid in ipairs(scan) do
      local of = #tid <= 80 and job_of(tid)
      if not job_id and of then
        job_id, j = of, consider_job(ctx, s, of)
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
    from = '(' .. task_score(j[7], j[8], job_id .. ':'
      .. int((int_in(j[9], 1, MAX_JOB_TASKS) or 1) - 1))
  end
  s.job = s.tids[1] and job_of(s.tids[1])
  return s
end
