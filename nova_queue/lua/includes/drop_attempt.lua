--[[ drop_attempt: takes one of a leased task's two attempts off it: `which` is 'backup'
  (its b_* fields go) or 'primary' (the backup's fields become the primary ones, so the
  task names the attempt that runs on). The dropped attempt leaves its worker's held set;
  the lease set keeps the task under the other attempt's deadline. Returns the dropped
  attempt's {worker, worker_name, backend, host, lease_gen, attempt_id, claimed_ms, ...}
  (the order of the primary fields below).
]]
--- @include "common"
local function drop_attempt(ctx, tid, which)
  local task_key = ctx.prefix .. 'task:' .. tid
  local names = { 'worker', 'worker_name', 'backend', 'host', 'lease_gen', 'attempt_id',
    'claimed_ms', 'deadline_ms', 'run_deadline_ms', 'predicted_s' }
  local b_names = {}
  for i, name in ipairs(names) do
    b_names[i] = 'b_' .. name
  end
  local p = redis.call('HMGET', task_key, unpack(names))
  local b = redis.call('HMGET', task_key, unpack(b_names))
  local dropped, rest = b, p
  if which == 'primary' then
    dropped, rest = p, b
    local args = {}
    for i, name in ipairs(names) do
      args[2 * i - 1], args[2 * i] = name, b[i] or ''
    end
    redis.call('HSET', task_key, unpack(args))
  end
  redis.call('HDEL', task_key, unpack(b_names))
  redis.call('SREM', ctx.prefix .. 'held:' .. (dropped[1] or ''), tid)
  redis.call('ZADD', ctx.leases, 'XX', tonumber(rest[8]) or 0, tid)
  return dropped
end
