--[[ commit_batch: the commits of complete_batch-12 (batch_argv's, checked by check_batch), in
  order, each fenced and answered on its own: unknown task, ALREADY (this exact commit took
  effect: its reply was lost), stale (reject_stale), or committed. A plain commit (no
  backup attempt, no earlier failures to blame, its job not cancelled, its worker not
  quarantined) takes commit_fast's path: its task hash now, its completed event and counts
  gathered in b and written by flush_batch; any other is complete_task's, after a flush (it
  reads the counts afresh). Gathered completed events are written before any other event
  (a stale one's, complete_task's, job_finished), so the stream's order is that of single
  commits.
  K: complete_batch-12's KEYS by name. Returns the per-commit codes and finished flags.
]]
--- @include "fence"
--- @include "reject_stale"
--- @include "complete_task"
--- @include "batch_job"
--- @include "commit_fast"
--- @include "flush_batch"
--- @include "emit_completed"
local function commit_batch(K, commits)
  local first = commits[1]
  local ctx = {
    prefix = first.prefix, wid = first.wid, alpha = first.alpha, leases = K.leases,
    alive = K.alive, inflight = K.inflight, failed = K.failed, finished = K.finished,
    events = K.events, maxlen = first.maxlen,
  }
  local now = now_ms()
  local b = { tids = {}, jobs = {}, order = {}, last = {}, runs = {}, apps = {}, usage = {},
    ev = { job = {}, task = {}, gen = {}, run_s = {}, warm = {}, result = {} } }
  local codes, finished = {}, {}
  -- a quarantined worker's commit may be its probe: complete_task's order of events
  local probing = redis.call('HGET', K.worker, 'quarantined') == '1'
  for i, c in ipairs(commits) do
    local task_key = ctx.prefix .. 'task:' .. c.tid
    local r = redis.call('HMGET', task_key, 'state', 'worker', 'lease_gen', 'attempt_id',
      'b_worker', 'cost', 'failed_on', 'charged')
    -- t as complete-11 reads it; the backup's fields only when there is a backup (fence
    -- matches them only with b_worker), the result only for a done task (a replay)
    local more = (r[5] or r[1] == 'done')
      and redis.call('HMGET', task_key, 'b_lease_gen', 'b_attempt_id', 'result') or {}
    local t = { r[1], r[2], r[3], r[4], r[5], more[1], more[2], more[3], r[6], r[7], r[8] }
    finished[i] = 0
    local code = CODE.UNKNOWN_TASK
    if t[1] == 'done' and t[2] == c.wid and t[3] == c.gen and t[4] == c.attempt_id
        and t[8] == c.result_key then
      code = CODE.ALREADY
    elseif t[1] then
      code = fence(t, c.wid, c.gen, c.attempt_id)
      local job_id = job_of(c.tid)
      local j = code == CODE.OK and batch_job(ctx, b, job_id)
      if code ~= CODE.OK then
        emit_completed(ctx, b.ev, ctx.wid) -- the events in the order of single commits
        reject_stale(ctx, c.tid, c.wid, 'complete', c.gen, t, code)
      elseif t[5] or t[10] or j[1] == 'cancelled' or probing then
        flush_batch(ctx, K, b, now)
        local done = complete_task({ task = task_key, job = ctx.prefix .. 'job:' .. job_id,
          worker = K.worker, held = K.held, fleet = ctx.prefix .. 'app:' .. (j[2] or '')
          .. ':fleet', leases = K.leases, alive = K.alive, inflight = K.inflight,
          failed = K.failed, finished = K.finished, events = K.events }, c)
        code, finished[i] = done[1], done[2]
      else
        finished[i] = commit_fast(ctx, b, c, t, j, now, i)
      end
    end
    codes[i] = code
  end
  flush_batch(ctx, K, b, now)
  return codes, finished
end
