--[[ free_hand_back: whether worker wid's hand-back of task tid without a result is free (no
  attempt used, no blame): a shutdown, an infra failure, its departure — the worker's own
  word. Free FREE_BACKS_PER_TASK times per task and, with `per_worker`, FREE_BACKS_PER_WINDOW
  times per worker in FREE_WINDOW_MS (its count moves to a new worker id of its identity:
  take_over_identity); past either, free only while no other worker of the task's app
  succeeds (others_succeed): then the pool is failing, not this worker. Counts this
  hand-back either way (task free_backs; worker free_n since free_since_ms). Returns true if
  it is free.
]]
--- @include "others_succeed"
local function free_hand_back(ctx, tid, wid, now, per_worker)
  local task_key = ctx.prefix .. 'task:' .. tid
  local backs = (int_in(redis.call('HGET', task_key, 'free_backs'), 0, 1e15) or 0) + 1
  redis.call('HSET', task_key, 'free_backs', backs)
  local over = backs > FREE_BACKS_PER_TASK
  if per_worker then
    local worker_key = ctx.prefix .. 'worker:' .. wid
    local free_n, free_since_ms = unpack(redis.call('HMGET', worker_key, 'free_n',
      'free_since_ms'))
    local since = int_in(free_since_ms, 0, 1e15)
    local n = 1
    if since and now - since >= 0 and now - since < FREE_WINDOW_MS then
      n = (int_in(free_n, 0, 1e15) or 0) + 1
    else
      since = now
    end
    redis.call('HSET', worker_key, 'free_n', n, 'free_since_ms', int(since))
    over = over or n > FREE_BACKS_PER_WINDOW
  end
  if not over then
    return true
  end
  local app = is_task_id(tid) and redis.call('HGET', ctx.prefix .. 'job:' .. job_of(tid), 'app')
  return not (app and is_name(app, 64) and others_succeed(ctx.prefix, app, wid, now, ''))
end
