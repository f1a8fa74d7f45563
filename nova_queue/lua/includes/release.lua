--[[ release: ends a lease without a commit (failure, expiry, lost worker, shutdown).
  The task goes back to pending, or to failed when its attempts are used up, or to
  cancelled when its job was cancelled. `burn` = false gives the attempt back. A backup
  attempt (see write_backup) ends with it.
  ctx fields used: prefix, leases, inflight, failed, events, maxlen, finished, and
  pending when the caller passed the task's pending key in KEYS; budget (releases this
  call may still make) where the caller loops.
  Returns the task's new state, or nil if it was not leased.
]]
--- @include "drop_attempt"
--- @include "queue_job"
--- @include "release_verify"
local function release(ctx, tid, now, kind, message, burn)
  redis.call('ZREM', ctx.leases, tid)
  if not is_task_id(tid) then
    return nil -- not a task id (a lease written by hand): nothing to release
  end
  local task_key = ctx.prefix .. 'task:' .. tid
  local state, worker, attempt_count, lease_gen, b_worker, cand = unpack(redis.call('HMGET',
    task_key, 'state', 'worker', 'attempt_count', 'lease_gen', 'b_worker', 'cand'))
  if state ~= 'leased' then
    return nil
  end
  local job_id = job_of(tid)
  local job_key = ctx.prefix .. 'job:' .. job_id
  local app, job_state, max_attempts, priority, seq0, owner = unpack(redis.call('HMGET', job_key,
    'app', 'state', 'max_attempts', 'priority', 'seq0', 'owner'))
  local wid = worker or ''
  redis.call('SREM', ctx.prefix .. 'held:' .. wid, tid)
  if b_worker then
    drop_attempt(ctx, tid, 'backup') -- the backup attempt ends with the task's lease
  end
  if not app then
    redis.call('HSET', task_key, 'state', 'failed', 'error', 'job not found')
    return 'failed' -- a task without a job (written by hand)
  end
  ctx.budget = ctx.budget and ctx.budget - 1
  redis.call('HINCRBY', ctx.inflight, app, -1)
  redis.call('HINCRBY', job_key, 'leased', -1)
  if cand then -- a verifier's lease: the result awaits verification again
    return release_verify(ctx, tid, job_state, app, wid, kind, message, burn, now)
  end
  local attempts = int_in(attempt_count, 0, 1e15) or 0
  if not burn and attempts > 0 then
    attempts = attempts - 1
  end
  if job_state == 'cancelled' then -- the task's new state
    state = 'cancelled'
    redis.call('HINCRBY', job_key, 'cancelled', 1)
  elseif burn and attempts >= (int_in(max_attempts, 1, MAX_ATTEMPTS) or 1) then
    state = 'failed'
    redis.call('HINCRBY', job_key, 'failed', 1)
    redis.call('ZADD', ctx.failed, now, tid)
  else
    state = 'pending'
    redis.call('HINCRBY', job_key, 'pending', 1)
    redis.call('ZADD', ctx.pending or (ctx.prefix .. 'pending:' .. app),
      task_score(priority, seq0, tid), tid)
    queue_job(ctx.prefix, job_id, app, owner, priority, seq0)
  end
  redis.call('HDEL', task_key, 'worker', 'worker_name', 'backend', 'host', 'attempt_id',
    'deadline_ms', 'predicted_s', 'run_deadline_ms')
  redis.call('HSET', task_key, 'state', state, 'attempt_count', attempts, 'last_worker', wid,
    'error_kind', kind, 'error', message)
  emit(ctx, state == 'failed' and 'failed' or state == 'cancelled' and 'cancelled' or 'requeued',
    'job', job_id, 'task', index_of(tid), 'worker', wid, 'kind', kind,
    'attempt', attempts, 'lease_gen', lease_gen or '0', 'error', message)
  if state ~= 'pending' then
    finish_job_if_done(ctx, job_key, job_id, now)
  end
  return state
end
