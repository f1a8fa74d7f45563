--[[ others_succeed: evidence that a failure streak is its worker's fault, not its tasks':
  another live worker of `app` committed a task since a minute before the streak began
  (since_ms): the app works elsewhere; and
  none of the streak's tasks (`tids`) failed on another identity too (failed_on). Weighs at most
  MAX_LISTED workers of the app and MAX_STREAK tasks.
]]
--- @include "members_upto"
local function others_succeed(prefix, app, wid, since_ms, tids)
  local visited, ident = 0, ident_of(wid)
  for tid in string.gmatch(string.sub(tids or '', 1, 81 * MAX_STREAK), '[^,]+') do
    visited = visited + 1
    if visited > MAX_STREAK then
      break
    end
    local failed_on = is_task_id(tid) and redis.call('HGET', prefix .. 'task:' .. tid, 'failed_on')
    for id in string.gmatch(string.sub(failed_on or '', 1, MAX_OOM_BYTES), '[^,]+') do
      if id ~= ident then
        return false -- a task of the streak fails elsewhere too
      end
    end
  end
  for _, v in ipairs(members_upto(prefix .. 'app:' .. app .. ':workers', MAX_LISTED)) do
    if v ~= wid and (tonumber(redis.call('HGET', prefix .. 'worker:' .. v, 'last_done_ms'))
        or 0) >= since_ms - 60000 then
      return true
    end
  end
  return false
end
