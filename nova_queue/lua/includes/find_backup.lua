--[[ find_backup: a running task of the app that the claiming worker (estimate t_w; it has
  nothing of its own to take) would finish clearly sooner than the attempt running it.
  That attempt's rest is what its prediction leaves while it is on time, else as long again
  as it has run (it is overdue: its prediction was wrong); the backup must save at least
  BACKUP_MIN_GAIN_MS and BACKUP_GAIN_SHARE of that rest, so correct predictions start no
  backups. Looks at the first MAX_BACKUP_SCAN leases; skips tasks that had a backup (one
  per task), are this worker's, or failed (on its identity) or ran out of memory on it, or
  whose job's model this worker could not prepare (`marks`: cannot_run_here's), and those
  of a job with a deadline that the running attempt still makes (a backup there only spends:
  nova_queue/terms.py). Returns the
  one that saves most as {tid, t (its BACKUP_TASK read), j (its job's BACKUP_JOB read),
  cost}, or nil.
]]
--- @include "in_list"
local function find_backup(ctx, a, t_w, now, marks)
  local best, best_gain, jobs = nil, 0, {}
  for _, tid in ipairs(redis.call('ZRANGE', ctx.leases, 0, MAX_BACKUP_SCAN - 1)) do
    local job_id = is_task_id(tid) and job_of(tid)
    local t = job_id and redis.call('HMGET', ctx.prefix .. 'task:' .. tid, unpack(BACKUP_TASK))
    if t and t[BACKUP_TASK.state] == 'leased' and t[BACKUP_TASK.worker] ~= a.wid
        and not t[BACKUP_TASK.backups] and not in_list(t[BACKUP_TASK.oom], a.wid)
        and not in_list(t[BACKUP_TASK.failed_on], ident_of(a.wid)) then
      local j = jobs[job_id]
        or redis.call('HMGET', ctx.prefix .. 'job:' .. job_id, unpack(BACKUP_JOB))
      jobs[job_id] = j
      if j[BACKUP_JOB.app] == a.app and j[BACKUP_JOB.state] ~= 'cancelled'
          and not (marks and marks[j[BACKUP_JOB.model] or '']) then
        local cost = num_in(t[BACKUP_TASK.cost], MIN_COST, MAX_COST) or 1
        local elapsed = math.max(now - (int_in(t[BACKUP_TASK.claimed_ms], 0, 1e15) or now), 0)
        local predicted = (num_in(t[BACKUP_TASK.predicted_s], 0, MAX_RUN_S) or 0) * 1000
        local rest = elapsed < predicted and predicted - elapsed or elapsed
        local gain = rest - t_w * cost * 1000
        local deadline = int_in(j[BACKUP_JOB.deadline_ms], 1, 1e15)
        if gain > best_gain and gain >= math.max(BACKUP_MIN_GAIN_MS, BACKUP_GAIN_SHARE * rest)
            and not (deadline and now + rest <= deadline) then
          best, best_gain = { tid = tid, t = t, j = j, cost = cost }, gain
        end
      end
    end
  end
  return best
end
