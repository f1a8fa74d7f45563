--[[ drop_attempt: takes one of a leased task's two attempts off it: `which` is 'backup'
  (its b_* fields go) or 'primary' (the backup's fields become the primary ones, so the
  task names the attempt that runs on). The dropped attempt leaves its worker's held set;
  the lease set keeps the task under the other attempt's deadline. Returns the dropped
  attempt's fields, read by ATTEMPT's indices (a primary's ATTEMPT read or a backup's
  BACKUP_ATTEMPT read).
]]
--- @include "common"
local function drop_attempt(ctx, tid, which)
  local task_key = ctx.prefix .. 'task:' .. tid
  local p = redis.call('HMGET', task_key, unpack(ATTEMPT))
  local b = redis.call('HMGET', task_key, unpack(BACKUP_ATTEMPT))
  local dropped, rest = b, p
  if which == 'primary' then
    dropped, rest = p, b
    local args = {}
    for i, name in ipairs({ unpack(ATTEMPT) }) do
      args[2 * i - 1], args[2 * i] = name, b[i] or ''
    end
    redis.call('HSET', task_key, unpack(args))
  end
  redis.call('HDEL', task_key, unpack(BACKUP_ATTEMPT))
  redis.call('SREM', ctx.prefix .. 'held:' .. (dropped[ATTEMPT.worker] or ''), tid)
  redis.call('ZADD', ctx.leases, 'XX', tonumber(rest[ATTEMPT.deadline_ms]) or 0, tid)
  return dropped
end
