--[[ stand_unverified: a result awaiting verification that no live worker may verify
  (orphan_verifications). `state` 'done': the first candidate's result stands unverified, as
  its maker made it (its key, run time, provenance, inline copy, worker and lease), and joins its
  identity's unverified results (unverified:<ident>, at its commit time): a later mismatch
  re-runs it. 'failed': two results that are not trusted disagreed and no trusted worker
  is live to decide. The job counts it done or failed instead of verifying. Emits
  unverified, then completed (when done), and finishes the job when it was the last.
]]
--- @include "write_done"
--- @include "candidate_commit"
--- @include "list_unverified"
--- @include "end_verification"
local function stand_unverified(ctx, tid, now, state)
  local K = { task = ctx.prefix .. 'task:' .. tid, job = ctx.prefix .. 'job:' .. job_of(tid) }
  local cand = redis.call('HMGET', K.task, unpack(CAND_TASK))
  local w = candidate_commit(ctx.prefix, tid, cand)
  redis.call('ZREM', ctx.prefix .. 'verify:' .. (redis.call('HGET', K.job, 'app') or ''), tid)
  emit(ctx, 'unverified', 'job', job_of(tid), 'task', index_of(tid), 'worker', w.wid,
    'state', state)
  if state == 'done' then
    write_done(K.task, w, int(now))
    redis.call('HSET', K.task, unpack(w.made))
    list_unverified(ctx.prefix, w.wid, tid, cand[CAND_TASK.cand_ms] or int(now))
    emit(ctx, 'completed', 'job', job_of(tid), 'task', index_of(tid), 'worker', w.wid,
      'lease_gen', w.gen, 'run_s', num(w.run_s), 'warm', '1', 'result', w.result_key)
  else
    redis.call('HSET', K.task, 'state', 'failed', 'error_kind', 'unverified', 'error',
      'two results disagreed and no trusted worker was live to decide')
    redis.call('ZADD', ctx.failed, now, tid)
  end
  end_verification(ctx, K, tid)
  redis.call('HINCRBY', K.job, state, 1)
  finish_job_if_done(ctx, K.job, job_of(tid), now)
end
