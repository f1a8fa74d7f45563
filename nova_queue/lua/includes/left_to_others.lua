--[[ left_to_others: whether the claiming worker leaves a task to others: it failed on the
  task (`failed_on`) or ran out of memory on it (`oom`), and some live worker of the app is
  on neither list (quarantined workers have left the app's worker set). With no such
  worker the task may run here again, so a task that fails everywhere still ends failed,
  and so may one listed with more than MAX_LISTED workers. s.live caches the app's live
  worker count for one scan.
]]
--- @include "in_list"
local function left_to_others(s, app_workers_key, wid, oom, failed_on)
  if not in_list(oom, wid) and not in_list(failed_on, wid) then
    return false
  end
  s.live = s.live or redis.call('SCARD', app_workers_key)
  local seen, listed, live_listed = {}, 0, 0
  for _, list in ipairs({ oom or '', failed_on or '' }) do
    for id in string.gmatch(list, '[^,]+') do
      listed = listed + 1
      if listed > MAX_LISTED then
        return false -- listed that often: the task's fault, not this worker's
      end
      if not seen[id] then
        seen[id] = true
        live_listed = live_listed + redis.call('SISMEMBER', app_workers_key, id)
      end
    end
  end
  return live_listed < s.live
end
