--[[ scan_candidates: up to k tasks a claim may lease. With two or more owners waiting,
  fair share decides whose (owner_jobs); else the queue order does (walk_pending). Returns
  s: tids, tasks (each the task's CLAIM_TASK read: consider_pending), costs, jobs (job id ->
  its CLAIM_JOB read: consider_job), job (the first candidate's job id) and removed
  (members that left the set).
]]
--- @include "owner_jobs"
--- @include "walk_pending"
local function scan_candidates(ctx, K, a, me, now)
  local s = { tids = {}, tasks = {}, costs = {}, jobs = {}, removed = 0, live = nil,
    memory = num_in(me.memory, 0, 1e18) }
  if not owner_jobs(ctx, K, a, me, s, now) then
    walk_pending(ctx, K, a, me, s, now)
  end
  s.job = s.tids[1] and job_of(s.tids[1])
  return s
end
