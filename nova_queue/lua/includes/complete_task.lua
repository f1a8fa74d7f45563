--[[ complete_task: the body of complete-11 as a function, so that complete_claim-15 can
  run it before a claim. K: complete-11's KEYS by name (task, job, worker, held, fleet, leases,
  alive, inflight, failed, finished, events); c: its ARGV by name (commit_argv). Checks as
  complete-11's header says (check_commit_ids, fence_commit, check_commit_report); a task
  with a backup attempt is settled first (settle_backup: the first commit wins; the
  primary's commit by a worker that is not vouched for makes a vouched verifier's backup
  its verification instead: free_sample), and the workers it failed on before are blamed
  (blame_others). A verifier's commit of a result
  awaiting verification settles it (complete_verified); the result of a worker that is not
  trusted may be held for verification (hold_unverified). Returns complete-11's reply.
]]
--- @include "fence_commit"
--- @include "reject_stale"
--- @include "release"
--- @include "check_commit_ids"
--- @include "check_commit_report"
--- @include "record_runs"
--- @include "settle_backup"
--- @include "blame_others"
--- @include "write_commit"
--- @include "note_usage"
--- @include "complete_verified"
--- @include "hold_unverified"
--- @include "free_sample"
local function complete_task(K, c)
  local bad = check_commit_ids(K, c)
  if bad then
    return bad_input(bad)
  end
  local wid, tid, gen, now = c.wid, c.tid, c.gen, now_ms()
  local ctx = {
    prefix = c.prefix, wid = c.wid, alpha = c.alpha, leases = K.leases, alive = K.alive,
    inflight = K.inflight, failed = K.failed, finished = K.finished, events = K.events,
    maxlen = c.maxlen,
  }
  local job_id, index = job_of(tid), index_of(tid)
  local code, which, t = fence_commit(K.task, c)
  if code == CODE.UNKNOWN_TASK or code == CODE.ALREADY then
    return { code, 0 }
  end
  local j = redis.call('HMGET', K.job, unpack(COMMIT_JOB))
  if code == CODE.OK then
    bad = check_commit_report(c, job_id, index)
    if bad then
      return bad_input(bad)
    end
    if j[COMMIT_JOB.state] == 'cancelled' then
      release(ctx, tid, now, 'cancelled', 'job cancelled', false)
      code = CODE.JOB_CANCELLED
    end
  end
  if code ~= CODE.OK then
    reject_stale(ctx, tid, wid, 'complete', gen, t, code)
    return { code, 0 }
  end
  local app, run_s, cost = j[COMMIT_JOB.app], c.run_s, t[COMMIT_TASK.cost]
  local trust, verifies = unpack(redis.call('HMGET', K.worker, 'trust', 'verifies'))
  if (tonumber(verifies) or 0) > 0 and redis.call('HGET', K.task, 'cand') then
    return complete_verified(ctx, K, tid, j, c, t, trust, now)
  end
  local backup = t[COMMIT_TASK.b_worker] -- trust: 'new', 'earned' or none (vouched)
  local held = backup and which == 'primary' and trust and free_sample(ctx, K, tid, c, backup, now)
  if backup and not held then
    settle_backup(ctx, tid, which, app, cost, now)
  end
  held = held or (trust and hold_unverified(ctx, K, tid, j, c, trust, now))
  if not held then
    write_commit(ctx, K, tid, j, c, now)
  end
  record_runs(ctx, K, app, { { tid = tid, cost = cost, run_s = run_s, warm = c.warm == '1' } },
    now)
  note_usage(c.prefix, j[COMMIT_JOB.owner] or '',
    run_s - (num_in(t[COMMIT_TASK.charged], 0, MAX_RUN_S) or 0), now)
  if held then
    return { CODE.OK, 0 }
  end
  emit(ctx, 'completed', 'job', job_id, 'task', index, 'worker', wid, 'lease_gen', gen,
    'run_s', num(run_s), 'warm', c.warm == '1' and '1' or '0', 'result', c.result_key)
  if t[COMMIT_TASK.failed_on] and blame_others(ctx, tid, t[COMMIT_TASK.failed_on], wid, now, c) then
    -- a quarantine gave attempts back, maybe to this job's failed tasks: count afresh
    return { CODE.OK, finish_job_if_done(ctx, K.job, job_id, now) }
  end
  return { CODE.OK, finish_job_with(ctx, K.job, job_id, now, j) }
end
