--[[ hold_for_verify: a commit sampled for verification (sample_verify) does not make its
  task done: the task is `verifying`, its result kept as the candidate `slot`
  (write_candidate: 'cand', or 'cand2' for a second opinion that disagreed, `need`
  'trusted' then). The lease ends (lease set, held set,
  in-flight count, the job's leased count) and the task joins verify:<app> for another
  worker to run again (take_verify). The job counts one more verifying task (a first hold).
  Emits verifying. c: commit_argv's fields; j: the job's COMMIT_JOB read.
]]
--- @include "write_candidate"
local function hold_for_verify(ctx, K, tid, j, c, now, slot, need)
  local app = j[COMMIT_JOB.app] or ''
  redis.call('HSET', K.task, 'state', 'verifying')
  write_candidate(ctx, K, tid, c, now, slot, need)
  redis.call('ZREM', K.leases, tid)
  redis.call('SREM', K.held, tid)
  redis.call('HINCRBY', ctx.inflight, app, -1)
  j[COMMIT_JOB.leased] = int((tonumber(j[COMMIT_JOB.leased]) or 0) - 1)
  redis.call('HSET', K.job, 'leased', j[COMMIT_JOB.leased])
  if slot == 'cand' then
    redis.call('HINCRBY', K.job, 'verifying', 1)
  end
  redis.call('ZADD', ctx.prefix .. 'verify:' .. app, now, tid)
  emit(ctx, 'verifying', 'job', job_of(tid), 'task', index_of(tid), 'worker', c.wid,
    'lease_gen', c.gen, 'result', c.result_key, 'need', need)
end
