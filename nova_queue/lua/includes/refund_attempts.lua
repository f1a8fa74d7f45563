--[[ refund_attempts: gives back the attempts worker wid used on the tasks `tids` (its
  failure streak, comma-separated, perhaps begun under an earlier worker id of its identity;
  at most MAX_STREAK): each task listing its identity in failed_on, and not cancelled, counts
  one attempt fewer, and one that failed for good through an attempt of that identity
  returns to the queue (unfail_task). Returns how many tasks
  got an attempt back.
]]
--- @include "in_list"
--- @include "unfail_task"
local function refund_attempts(ctx, wid, tids, now)
  local n, visited, ident = 0, 0, ident_of(wid)
  for tid in string.gmatch(string.sub(tids or '', 1, 81 * MAX_STREAK), '[^,]+') do
    visited = visited + 1
    if visited > MAX_STREAK then
      break
    end
    local task_key = is_task_id(tid) and (ctx.prefix .. 'task:' .. tid)
    local state, attempt_count, last_worker, failed_on = unpack(task_key and redis.call('HMGET',
      task_key, 'state', 'attempt_count', 'last_worker', 'failed_on') or {})
    local attempts = int_in(attempt_count, 1, 1e15)
    if attempts and state ~= 'cancelled' and in_list(failed_on, ident) then
      redis.call('HSET', task_key, 'attempt_count', attempts - 1)
      if state == 'failed' and ident_of(last_worker or '') == ident then
        unfail_task(ctx, tid, now, attempts - 1)
      end
      n = n + 1
    end
  end
  return n
end
