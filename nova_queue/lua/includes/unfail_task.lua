--[[ unfail_task: a task that failed for good returns to its app's queue at its old place
  (its attempts were given back: refund_attempts); its job's counts move from failed to
  pending, and a job this had finished (done or failed) runs again (it finishes, and is
  post-processed, again). A cancelled job stays as it is, and so does one being deleted (expired). ctx
  fields used: prefix, failed, finished, events, maxlen. Returns true if the task is pending
  again.
]]
--- @include "queue_job"
local function unfail_task(ctx, tid, now, attempts)
  local job_id = job_of(tid)
  local job_key = ctx.prefix .. 'job:' .. job_id
  local app, state, priority, seq0, owner = unpack(redis.call('HMGET', job_key, 'app', 'state',
    'priority', 'seq0', 'owner'))
  if not is_name(app, 64) or state == 'cancelled' or state == 'expired' then
    return false
  end
  redis.call('HSET', ctx.prefix .. 'task:' .. tid, 'state', 'pending')
  redis.call('ZREM', ctx.failed, tid)
  redis.call('ZADD', ctx.prefix .. 'pending:' .. app, task_score(priority, seq0, tid), tid)
  queue_job(ctx.prefix, job_id, app, owner, priority, seq0)
  redis.call('HINCRBY', job_key, 'failed', -1)
  redis.call('HINCRBY', job_key, 'pending', 1)
  if is_finished(state) then -- done or failed: it runs again
    redis.call('HSET', job_key, 'state', 'running')
    redis.call('HDEL', job_key, 'finished_ms')
    redis.call('ZREM', ctx.finished, job_id)
  end
  emit(ctx, 'requeued', 'job', job_id, 'task', index_of(tid), 'worker', '', 'kind', 'refund',
    'attempt', attempts, 'lease_gen', '0',
    'error', 'attempts used by a quarantined worker were given back')
  return true
end
