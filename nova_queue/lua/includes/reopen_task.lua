--[[ reopen_task: a result that stood unverified is withdrawn (its maker, identity `ident`,
  was caught: catch_ident): the task, if it is still done with a result of that identity
  and no verifier's word on it, is pending again at its old place with its attempts given
  back, its result (and inline copy) gone; its job counts one fewer done and one more
  pending, and a job this had finished runs again (it finishes, and is post-processed,
  again). A cancelled or expiring job is left as it is. Emits invalidated. Returns 1 if the
  task was reopened, else 0.
]]
--- @include "queue_job"
local function reopen_task(ctx, tid, ident, now)
  local task_key = is_task_id(tid) and ctx.prefix .. 'task:' .. tid
  local state, worker, verified_by = unpack(task_key and redis.call('HMGET', task_key, 'state',
    'worker', 'verified_by') or {})
  if state ~= 'done' or ident_of(worker or '') ~= ident or verified_by then
    return 0
  end
  local job_id = job_of(tid)
  local job_key = ctx.prefix .. 'job:' .. job_id
  local app, job_state, priority, seq0, owner = unpack(redis.call('HMGET', job_key, 'app',
    'state', 'priority', 'seq0', 'owner'))
  if not is_name(app, 64) or job_state == 'cancelled' or job_state == 'expired' then
    return 0
  end
  redis.call('HDEL', task_key, 'result', 'finished_ms', 'run_s', 'warm', 'meta', 'cold_s',
    'worker', 'worker_name', 'backend', 'host', 'attempt_id')
  redis.call('HSET', task_key, 'state', 'pending', 'attempt_count', 0, 'last_worker', worker,
    'error_kind', 'invalidated', 'error', 'its result was withdrawn: ' .. ident
    .. ' was caught returning a wrong result')
  redis.call('HDEL', ctx.prefix .. 'inline:' .. tid, 'data')
  redis.call('ZADD', ctx.prefix .. 'pending:' .. app, task_score(priority, seq0, tid), tid)
  queue_job(ctx.prefix, job_id, app, owner, priority, seq0)
  redis.call('HINCRBY', job_key, 'done', -1)
  redis.call('HINCRBY', job_key, 'pending', 1)
  if is_finished(job_state) then
    redis.call('HSET', job_key, 'state', 'running')
    redis.call('HDEL', job_key, 'finished_ms')
    redis.call('ZREM', ctx.finished, job_id)
    redis.call('ZREM', ctx.prefix .. 'expiring', job_id)
  end
  emit(ctx, 'invalidated', 'job', job_id, 'task', index_of(tid), 'worker', worker, 'ident', ident)
  return 1
end
