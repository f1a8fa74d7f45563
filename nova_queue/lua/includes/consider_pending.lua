--[[ consider_pending: one member of the pending set, met by the candidate scan (its job is
  one this worker may take: job_eligible). A task this worker may take is appended to s
  (tids, tasks, costs); a member that is not a pending task (written by hand) or a task
  that must not be leased (drop_task) leaves the set, counted in s.removed. A task that ran
  out of memory goes next to a worker with more device memory than the largest it failed
  on, or one that takes a smaller batch than it failed in, while such a worker is live
  (oom_fits); else, as a task that failed here, to another live worker (left_to_others).
  The task is read as CLAIM_TASK (s.tasks keeps the record), its job as the scan read it.
]]
--- @include "drop_task"
--- @include "left_to_others"
--- @include "oom_fits"
local function consider_pending(ctx, K, a, s, tid, now)
  local task_key = ctx.prefix .. 'task:' .. tid
  local job_id = #tid <= 80 and job_of(tid) -- nil: not a task id
  local t = job_id and redis.call('HMGET', task_key, unpack(CLAIM_TASK))
  if not t or t[CLAIM_TASK.state] ~= 'pending' then
    redis.call('ZREM', K.pending, tid)
    s.removed = s.removed + 1
    return
  end
  local j = s.jobs[job_id]
  if j[CLAIM_JOB.state] == 'cancelled' or #(t[CLAIM_TASK.input] or '') > MAX_INPUT_BYTES then
    drop_task(ctx, K.pending, now, tid, task_key, job_id, j)
    s.removed = s.removed + 1
    return
  end
  local fits = nil -- oom_fits: true, false (wait for a larger worker), nil (no rule)
  if t[CLAIM_TASK.oom_memory] then
    fits = oom_fits(ctx.prefix, s, K.app_workers, a, t, now)
  end
  if fits == false then
    return -- a worker with more memory (or smaller batches) is live: it goes there
  end
  local oom, failed_on = t[CLAIM_TASK.oom], t[CLAIM_TASK.failed_on]
  if not fits and (oom or failed_on)
      and left_to_others(s, ctx.prefix, K.app_workers, a, oom, failed_on, now) then
    return
  end
  local n = #s.tids + 1
  s.tids[n], s.tasks[n], s.costs[n] = tid, t, num_in(t[CLAIM_TASK.cost], MIN_COST, MAX_COST) or 1
end
