--[[ stand_unverified: a result awaiting verification that no live worker may verify
  (orphan_verifications). `state` 'done': the first candidate's result stands unverified, as
  its maker made it (its key, run time, provenance, inline copy, worker and lease), and joins its
  identity's unverified results (unverified:<ident>, at its commit time): a later mismatch
  re-runs it. 'failed': two results that are not trusted disagreed and no trusted worker
  is live to decide. The job counts it done or failed instead of verifying. Emits
  unverified, then completed (when done), and finishes the job when it was the last.
]]
--- @include "write_done"
local function stand_unverified(ctx, tid, now, state)
  local task_key, job_key = ctx.prefix .. 'task:' .. tid, ctx.prefix .. 'job:' .. job_of(tid)
  local cand = redis.call('HMGET', task_key, unpack(CAND_TASK))
  local wid, made_ms = cand[CAND_TASK.cand_wid] or '', cand[CAND_TASK.cand_ms] or int(now)
  local gen = cand[CAND_TASK.cand_gen] or '0'
  redis.call('ZREM', ctx.prefix .. 'verify:' .. (redis.call('HGET', job_key, 'app') or ''), tid)
  emit(ctx, 'unverified', 'job', job_of(tid), 'task', index_of(tid), 'worker', wid,
    'state', state)
  if state == 'done' then
    local c = { prefix = ctx.prefix, tid = tid, result_key = cand[CAND_TASK.cand],
      run_s = num_in(cand[CAND_TASK.cand_run_s], 0, MAX_RUN_S) or 0, warm = '1',
      provenance = cand[CAND_TASK.cand_meta] or '{}',
      inline = redis.call('HGET', ctx.prefix .. 'inline:' .. tid, 'cand') or '' }
    write_done(task_key, c, int(now))
    redis.call('HSET', task_key, 'worker', wid, 'worker_name', cand[CAND_TASK.cand_name] or '',
      'backend', cand[CAND_TASK.cand_backend] or '', 'host', cand[CAND_TASK.cand_host] or '',
      'lease_gen', gen, 'attempt_id', cand[CAND_TASK.cand_attempt] or '')
    local list = ctx.prefix .. 'unverified:' .. ident_of(wid)
    redis.call('ZADD', list, made_ms, tid)
    if redis.call('ZCARD', list) > MAX_UNVERIFIED then
      redis.call('ZREM', list, unpack(redis.call('ZRANGE', list, 0, 0)))
    end
    emit(ctx, 'completed', 'job', job_of(tid), 'task', index_of(tid), 'worker', wid,
      'lease_gen', gen, 'run_s', num(c.run_s), 'warm', '1', 'result', c.result_key)
  else
    redis.call('HSET', task_key, 'state', 'failed', 'error_kind', 'unverified', 'error',
      'two results disagreed and no trusted worker was live to decide')
    redis.call('ZADD', ctx.failed, now, tid)
  end
  redis.call('HDEL', task_key, 'v_since_ms', 'v_need', 'v_tries', 'cand', 'cand_wid',
    'cand_name', 'cand_backend', 'cand_host', 'cand_run_s', 'cand_ms', 'cand_meta', 'cand_gen',
    'cand_attempt', 'cand2', 'cand2_wid', 'cand2_name', 'cand2_backend', 'cand2_host',
    'cand2_run_s', 'cand2_ms', 'cand2_meta', 'cand2_gen', 'cand2_attempt')
  redis.call('HDEL', ctx.prefix .. 'inline:' .. tid, 'cand', 'cand2')
  redis.call('HINCRBY', job_key, 'verifying', -1)
  redis.call('HINCRBY', job_key, state, 1)
  finish_job_if_done(ctx, job_key, job_of(tid), now)
end
