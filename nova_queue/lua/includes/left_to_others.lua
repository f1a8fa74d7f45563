--[[ left_to_others: whether the claiming worker leaves a task to others because it ran out
  of memory on it: `oom` (the task's list of such workers) names it while some live worker
  of the app has not. s.live caches the app's live worker count for one scan.
]]
--- @include "common"
local function left_to_others(s, app_workers_key, wid, oom)
  oom = string.sub(oom, 1, MAX_OOM_BYTES)
  if not string.find(',' .. oom .. ',', ',' .. wid .. ',', 1, true) then
    return false
  end
  s.live = s.live or redis.call('SCARD', app_workers_key)
  return select(2, string.gsub(oom, '[^,]+', '')) < s.live
end
