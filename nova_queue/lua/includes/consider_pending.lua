--[[ consider_pending: one member of the pending set, met by the candidate scan. A task
  this worker may take is appended to s (tids, tasks, costs); a task of a job still being
  published, or one left_to_others, is skipped; a member that is not a pending task
  (written by hand) or a task that must not be leased (drop_task) leaves the set, counted
  in s.removed. s.jobs caches each job's {state, params, pending, leased, timeout_s}.
]]
--- @include "drop_task"
--- @include "left_to_others"
local function consider_pending(ctx, K, wid, s, tid, now)
  local task_key = ctx.prefix .. 'task:' .. tid
  local job_id = #tid <= 80 and job_of(tid) -- nil: not a task id
  local t = job_id and redis.call('HMGET', task_key, 'cost', 'oom', 'input', 'lease_gen',
    'attempt_count', 'state', 'gen_top', 'failed_on')
  if not t or t[6] ~= 'pending' then
    redis.call('ZREM', K.pending, tid)
    s.removed = s.removed + 1
    return
  end
  local j = s.jobs[job_id]
  if not j then
    j = redis.call('HMGET', ctx.prefix .. 'job:' .. job_id, 'state', 'params', 'pending', 'leased',
      'timeout_s')
    s.jobs[job_id] = j
  end
  if j[1] == 'staging' then
    return -- being published (enqueue-8 moves a large job in chunks): not yet claimable
  end
  if j[1] == 'cancelled' or #(t[3] or '') > MAX_INPUT_BYTES then
    drop_task(ctx, K.pending, now, tid, task_key, job_id, j)
    s.removed = s.removed + 1
    return
  end
  if (t[2] or t[8]) and left_to_others(s, K.app_workers, wid, t[2], t[8]) then
    return
  end
  local n = #s.tids + 1
  s.tids[n], s.tasks[n], s.costs[n] = tid, t, num_in(t[1], MIN_COST, MAX_COST) or 1
end
