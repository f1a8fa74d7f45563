--[[ commit_batch: the commits of complete_batch-12 (batch_argv's, checked by check_batch), in
  order, each fenced and answered on its own (fence_commit, as complete_task fences one):
  unknown task, ALREADY (this exact commit took effect: its reply was lost), stale
  (reject_stale), or committed. A plain commit (no backup attempt, no earlier failures to
  blame, its job not cancelled, its worker trusted, not quarantined and holding no
  verification) takes commit_fast's path: its
  task hash now, its completed event and counts gathered in b and written by flush_batch;
  any other is complete_task's, after a flush (it reads the counts afresh). A job is read
  once per batch (b.jobs, COMMIT_JOB; a flush forgets it). Gathered completed events are
  written before any other event (a stale one's, complete_task's, job_finished), so the
  stream's order is that of single commits.
  K: complete_batch-12's KEYS by name. Returns the per-commit codes and finished flags.
]]
--- @include "fence_commit"
--- @include "reject_stale"
--- @include "complete_task"
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
  -- a quarantined worker's commit may be its probe, one that is not trusted may be held for
  -- verification, a verifier's settles one: complete_task's path
  local quarantined, trust, verifies = unpack(redis.call('HMGET', K.worker, 'quarantined',
    'trust', 'verifies'))
  local slow = quarantined == '1' or trust == 'new' or trust == 'earned'
    or (tonumber(verifies) or 0) > 0
  for i, c in ipairs(commits) do
    local task_key = ctx.prefix .. 'task:' .. c.tid
    local code, _, t = fence_commit(task_key, c)
    finished[i] = 0
    if code == CODE.OK then
      local job_id = job_of(c.tid)
      local j = b.jobs[job_id]
        or redis.call('HMGET', ctx.prefix .. 'job:' .. job_id, unpack(COMMIT_JOB))
      b.jobs[job_id] = j
      if t[COMMIT_TASK.b_worker] or t[COMMIT_TASK.failed_on]
          or j[COMMIT_JOB.state] == 'cancelled' or slow then
        flush_batch(ctx, K, b, now)
        c.order = i
        code, finished[i] = unpack(complete_task({ task = task_key,
          job = ctx.prefix .. 'job:' .. job_id, worker = K.worker, held = K.held,
          fleet = ctx.prefix .. 'app:' .. (j[COMMIT_JOB.app] or '') .. ':fleet',
          leases = K.leases, alive = K.alive, inflight = K.inflight, failed = K.failed,
          finished = K.finished, events = K.events }, c))
      else
        finished[i] = commit_fast(ctx, b, c, t, j, now, i)
      end
    elseif code ~= CODE.UNKNOWN_TASK and code ~= CODE.ALREADY then
      emit_completed(ctx, b.ev, ctx.wid) -- the events in the order of single commits
      reject_stale(ctx, c.tid, c.wid, 'complete', c.gen, t, code)
    end
    codes[i] = code
  end
  flush_batch(ctx, K, b, now)
  return codes, finished
end
