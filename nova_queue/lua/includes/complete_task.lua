--[[ complete_task: the body of complete-11 as a function, so that complete_claim-15 can
  run it before a claim. K: complete-11's KEYS by name (task, job, worker, held, fleet, leases,
  alive, inflight, failed, finished, events); c: its ARGV by name (commit_argv). Checks as
  complete-11's header says (check_commit_ids, the fence, check_commit_report); a task
  with a backup attempt is settled first (settle_backup: the first commit wins), and the
  workers it failed on before are blamed (blame_others). Returns complete-11's reply.
]]
--- @include "fence"
--- @include "reject_stale"
--- @include "release"
--- @include "check_commit_ids"
--- @include "check_commit_report"
--- @include "record_runs"
--- @include "settle_backup"
--- @include "blame_others"
--- @include "write_commit"
--- @include "note_usage"
local function complete_task(K, c)
  local bad = check_commit_ids(K, c)
  if bad then
    return bad_input(bad)
  end
  local wid, tid, gen, result_key = c.wid, c.tid, c.gen, c.result_key
  local ctx = {
    prefix = c.prefix, wid = c.wid, alpha = c.alpha, leases = K.leases, alive = K.alive,
    inflight = K.inflight, failed = K.failed, finished = K.finished, events = K.events,
    maxlen = c.maxlen,
  }
  local now = now_ms()
  local job_id, index = job_of(tid), index_of(tid)
  local t = redis.call('HMGET', K.task, 'state', 'worker', 'lease_gen', 'attempt_id', 'b_worker',
    'b_lease_gen', 'b_attempt_id', 'result', 'cost', 'failed_on', 'charged')
  if not t[1] then
    return { CODE.UNKNOWN_TASK, 0 }
  end
  if t[1] == 'done' and t[2] == wid and t[3] == gen and t[4] == c.attempt_id
      and t[8] == result_key then
    return { CODE.ALREADY, 0 } -- this exact commit already took effect (its reply was lost)
  end
  local code, which = fence(t, wid, gen, c.attempt_id)
  local j = redis.call('HMGET', K.job, 'state', 'app', 'total', 'done', 'failed', 'cancelled',
    'finished_ms', 'leased', 'owner')
  if code == CODE.OK then
    bad = check_commit_report(c, job_id, index)
    if bad then
      return bad_input(bad)
    end
    if j[1] == 'cancelled' then
      release(ctx, tid, now, 'cancelled', 'job cancelled', false)
      code = CODE.JOB_CANCELLED
    end
  end
  if code ~= CODE.OK then
    reject_stale(ctx, tid, wid, 'complete', gen, t, code)
    return { code, 0 }
  end

  local app, run_s, warm = j[2], c.run_s, c.warm == '1'
  if t[5] then
    settle_backup(ctx, tid, which, app, t[9], now)
  end
  local done_n = write_commit(ctx, K, tid, j, c, now)
  record_runs(ctx, K, app, { { tid = tid, cost = t[9], run_s = run_s, warm = warm } }, now)
  note_usage(c.prefix, j[9] or '', run_s - (num_in(t[11], 0, MAX_RUN_S) or 0), now)
  emit(ctx, 'completed', 'job', job_id, 'task', index, 'worker', wid, 'lease_gen', gen,
    'run_s', num(run_s), 'warm', warm and '1' or '0', 'result', result_key)
  if t[10] and blame_others(ctx, tid, t[10], wid, now, c) then
    -- a quarantine gave attempts back, maybe to this job's failed tasks: count afresh
    return { CODE.OK, finish_job_if_done(ctx, K.job, job_id, now) }
  end
  return { CODE.OK, finish_job_with(ctx, K.job, job_id, now,
    { j[3], done_n, j[5], j[6], j[1], j[7] }) }
end
