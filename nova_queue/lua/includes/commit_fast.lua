--[[ commit_fast: a plain commit of a batch (commit_batch) takes effect: its task is done
  (write_done) and its completed event joins b.ev (one entry for the batch's commits:
  emit_completed, from flush_batch); the rest is gathered in b for flush_batch: the task
  leaves the lease set and the held set, its job counts one more done task and one fewer
  leased (in j, the batch's COMMIT_JOB read of it), its run joins the app's runs
  (record_runs), and its run time beyond what the claim charged joins its owner's usage.
  The commit of a job's last task writes the job's counts at once and finishes it (its
  completed events written first: job_finished right after its completed, as a single
  commit emits them). write_commit is the single commit's counterpart.
  t: fence_commit's COMMIT_TASK read. i: the commit's place in the batch. Returns 1 if it
  finished its job.
]]
--- @include "write_done"
--- @include "emit_completed"
local function commit_fast(ctx, b, c, t, j, now, i)
  local tid, job_id, app = c.tid, job_of(c.tid), j[COMMIT_JOB.app] or ''
  b.now_s = b.now_s or int(now)
  local run_s = write_done(ctx.prefix .. 'task:' .. tid, c, b.now_s)
  b.tids[#b.tids + 1] = tid
  if not b.last[job_id] then
    b.order[#b.order + 1] = job_id
  end
  b.last[job_id] = i
  j[COMMIT_JOB.done] = int((tonumber(j[COMMIT_JOB.done]) or 0) + 1)
  j[COMMIT_JOB.leased] = int((tonumber(j[COMMIT_JOB.leased]) or 0) - 1)
  local ev, e = b.ev, #b.ev.task + 1
  ev.job[e], ev.task[e], ev.gen[e], ev.run_s[e], ev.warm[e], ev.result[e] = job_id,
    index_of(tid), c.gen, run_s, c.warm, c.result_key
  local finished = 0
  local terminal = tonumber(j[COMMIT_JOB.done]) + (tonumber(j[COMMIT_JOB.failed]) or 0)
    + (tonumber(j[COMMIT_JOB.cancelled]) or 0)
  if terminal >= (tonumber(j[COMMIT_JOB.total]) or 0) then
    -- its last task: the job finishes now, as after a single commit (its event after completed)
    local key = ctx.prefix .. 'job:' .. job_id
    redis.call('HSET', key, 'leased', j[COMMIT_JOB.leased], 'done', j[COMMIT_JOB.done])
    b.last[job_id] = nil
    emit_completed(ctx, ev, c.wid)
    finished = finish_job_with(ctx, key, job_id, now, j)
    j[COMMIT_JOB.finished_ms] = j[COMMIT_JOB.finished_ms] or int(now)
  end
  local runs = b.runs[app]
  if not runs then
    runs = {}
    b.runs[app] = runs
    b.apps[#b.apps + 1] = app
  end
  runs[#runs + 1] = { tid = tid, cost = t[COMMIT_TASK.cost], run_s = c.run_s,
    warm = c.warm == '1' }
  local owner = j[COMMIT_JOB.owner] or ''
  b.usage[owner] = (b.usage[owner] or 0) + c.run_s
    - (num_in(t[COMMIT_TASK.charged], 0, MAX_RUN_S) or 0)
  return finished
end
