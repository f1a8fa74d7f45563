--[[ complete_task: the body of complete-11 as a function, so that complete_claim-15 can
  run it before a claim. K: complete-11's KEYS by name (task, job, worker, held, fleet, leases,
  alive, inflight, failed, finished, events); c: its ARGV by name (commit_argv). Checks as
  complete-11's header says (check_commit_ids, the fence, check_commit_report); returns
  complete-11's reply.
]]
--- @include "fence"
--- @include "reject_stale"
--- @include "release"
--- @include "check_commit_ids"
--- @include "check_commit_report"
--- @include "record_run"
local function complete_task(K, c)
  local bad = check_commit_ids(K, c)
  if bad then
    return bad_input(bad)
  end
  local wid, tid, gen, result_key = c.wid, c.tid, c.gen, c.result_key
  local ctx = {
    prefix = c.prefix, leases = K.leases, alive = K.alive, inflight = K.inflight,
    failed = K.failed, finished = K.finished, events = K.events, maxlen = c.maxlen,
  }
  local now = now_ms()
  local job_id, index = job_of(tid), index_of(tid)
  local t = redis.call('HMGET', K.task, 'state', 'worker', 'lease_gen', 'attempt_id', 'result',
    'cost')
  if not t[1] then
    return { CODE.UNKNOWN_TASK, 0 }
  end
  if t[1] == 'done' and t[2] == wid and t[3] == gen and t[4] == c.attempt_id
      and t[5] == result_key then
    return { CODE.ALREADY, 0 } -- this exact commit already took effect (its reply was lost)
  end
  local code = fence(t, wid, gen, c.attempt_id)
  local j = redis.call('HMGET', K.job, 'state', 'app', 'total', 'done', 'failed', 'cancelled',
    'finished_ms', 'leased')
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
  if warm then
    redis.call('HSET', K.task, 'state', 'done', 'result', result_key, 'finished_ms', int(now),
      'run_s', num(run_s), 'warm', '1', 'meta', c.provenance)
  else
    redis.call('HSET', K.task, 'state', 'done', 'result', result_key, 'finished_ms', int(now),
      'run_s', num(run_s), 'warm', '0', 'meta', c.provenance, 'cold_s', num(run_s))
  end
  redis.call('ZREM', K.leases, tid)
  redis.call('SREM', K.held, tid)
  redis.call('HINCRBY', ctx.inflight, app, -1)
  -- the job's counts: one read above, one write here (nothing else touches them in between)
  local done_n = (tonumber(j[4]) or 0) + 1
  redis.call('HSET', K.job, 'leased', int((tonumber(j[8]) or 0) - 1), 'done', int(done_n))
  record_run(ctx, K, wid, app, t[6], run_s, warm, c.alpha, now)
  emit(ctx, 'completed', 'job', job_id, 'task', index, 'worker', wid, 'lease_gen', gen,
    'run_s', num(run_s), 'warm', warm and '1' or '0', 'result', result_key)
  local finished = finish_job_with(ctx, K.job, job_id, now,
    { j[3], done_n, j[5], j[6], j[1], j[7] })
  return { CODE.OK, finished }
end
