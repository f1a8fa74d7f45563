--[[ release_verify: a verifier's lease of a result awaiting verification ends without a
  commit (release: its lease, held and in-flight entries and its job's leased count are
  gone already). The verifier holds one verification fewer. The task awaits verification
  again (verify:<app>), or is cancelled with its job, or, when verifiers' attempts that
  used one (`burn`) reach MAX_VERIFY_TRIES, fails: the result cannot be checked. Emits
  requeued, cancelled or failed. Returns the task's new state.
]]
--- @include "common"
local function release_verify(ctx, tid, job_state, app, wid, kind, message, burn, now)
  local task_key, job_key = ctx.prefix .. 'task:' .. tid, ctx.prefix .. 'job:' .. job_of(tid)
  local worker_key = ctx.prefix .. 'worker:' .. wid
  if is_name(wid, 128) and redis.call('HGET', worker_key, 'verifies') then
    redis.call('HINCRBY', worker_key, 'verifies', -1)
  end
  local tries = (int_in(redis.call('HGET', task_key, 'v_tries'), 0, 1e15) or 0)
    + (burn and 1 or 0)
  local state = 'verifying'
  if job_state == 'cancelled' then
    state = 'cancelled'
  elseif tries >= MAX_VERIFY_TRIES then
    state, message = 'failed', 'its result could not be verified: ' .. (message or '')
  end
  redis.call('HDEL', task_key, 'worker', 'worker_name', 'backend', 'host', 'attempt_id',
    'deadline_ms', 'predicted_s', 'run_deadline_ms')
  redis.call('HSET', task_key, 'state', state, 'v_tries', tries, 'last_worker', wid,
    'error_kind', kind, 'error', message)
  if state == 'verifying' then
    redis.call('ZADD', ctx.prefix .. 'verify:' .. app, now, tid)
  else
    redis.call('HINCRBY', job_key, 'verifying', -1)
    redis.call('HINCRBY', job_key, state, 1)
    if state == 'failed' then
      redis.call('ZADD', ctx.failed, now, tid)
    end
  end
  emit(ctx, state == 'verifying' and 'requeued' or state == 'failed' and 'failed' or 'cancelled',
    'job', job_of(tid), 'task', index_of(tid), 'worker', wid, 'kind', kind, 'attempt', tries,
    'lease_gen', redis.call('HGET', task_key, 'lease_gen') or '0', 'error', message)
  if state ~= 'verifying' then
    finish_job_if_done(ctx, job_key, job_of(tid), now)
  end
  return state
end
