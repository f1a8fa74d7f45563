--[[ in_list: whether worker id `wid` is in `list`, a task's comma-separated list of worker
  ids (oom, failed_on; false or nil when the field is missing).
]]
--- @include "common"
local function in_list(list, wid)
  return type(list) == 'string' and string.find(',' .. list .. ',', ',' .. wid .. ',', 1, true) ~= nil
end
