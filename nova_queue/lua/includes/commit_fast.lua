--[[ commit_fast: a plain commit of a batch (commit_batch) takes effect: its task is done with
  its result (the task hash as write_commit writes it) and its completed event joins b.ev
  (one entry for the batch's commits: emit_completed, from flush_batch); the rest is
  gathered in b for flush_batch: the task leaves the lease set and the held set, its job
  counts one more done task (in j, batch_job's read), its run joins the
  app's runs (record_runs), and its run time beyond what the claim charged joins its
  owner's usage. The commit of a job's last task writes the job's counts at once and
  finishes it (its completed events written first: job_finished right after its completed,
  as a single commit emits them).
  i: the commit's place in the batch. Returns 1 if it finished its job.
]]
--- @include "common"
--- @include "emit_completed"
local function commit_fast(ctx, b, c, t, j, now, i)
  local tid, job_id, app = c.tid, job_of(c.tid), j[2] or ''
  local warm, run_s = c.warm == '1', num(c.run_s)
  local task_key = ctx.prefix .. 'task:' .. tid
  b.now_s = b.now_s or int(now)
  if warm then
    redis.call('HSET', task_key, 'state', 'done', 'result', c.result_key, 'finished_ms',
      b.now_s, 'run_s', run_s, 'warm', '1', 'meta', c.provenance)
  else
    redis.call('HSET', task_key, 'state', 'done', 'result', c.result_key, 'finished_ms',
      b.now_s, 'run_s', run_s, 'warm', '0', 'meta', c.provenance, 'cold_s', run_s)
  end
  b.tids[#b.tids + 1] = tid
  if not b.last[job_id] then
    b.order[#b.order + 1] = job_id
  end
  b.last[job_id] = i
  j[4] = int((tonumber(j[4]) or 0) + 1)
  j[8] = int((tonumber(j[8]) or 0) - 1)
  local ev, e = b.ev, #b.ev.task + 1
  ev.job[e], ev.task[e], ev.gen[e], ev.run_s[e], ev.warm[e], ev.result[e] = job_id,
    index_of(tid), c.gen, run_s, c.warm, c.result_key
  local finished = 0
  local terminal = tonumber(j[4]) + (tonumber(j[5]) or 0) + (tonumber(j[6]) or 0)
  if terminal >= (tonumber(j[3]) or 0) then -- its last task: the job finishes now, as after
    local key = ctx.prefix .. 'job:' .. job_id -- a single commit (its event after completed)
    redis.call('HSET', key, 'leased', j[8], 'done', j[4])
    b.last[job_id] = nil
    emit_completed(ctx, ev, c.wid)
    finished = finish_job_with(ctx, key, job_id, now, { j[3], j[4], j[5], j[6], j[1], j[7] })
    j[7] = j[7] or int(now)
  end
  local runs = b.runs[app]
  if not runs then
    runs = {}
    b.runs[app] = runs
    b.apps[#b.apps + 1] = app
  end
  runs[#runs + 1] = { tid = tid, cost = t[9], run_s = c.run_s, warm = warm }
  local owner = j[9] or ''
  b.usage[owner] = (b.usage[owner] or 0) + c.run_s - (num_in(t[11], 0, MAX_RUN_S) or 0)
  return finished
end
