--[[ add_to_list: `list` (a task's comma-separated list: oom's worker ids, failed_on's
  identities) with `wid` added once; a list that would pass MAX_OOM_BYTES stays as it is.
]]
--- @include "in_list"
local function add_to_list(list, wid)
  if not list or list == '' then
    return wid
  end
  if in_list(list, wid) or #list + #wid >= MAX_OOM_BYTES then
    return list
  end
  return list .. ',' .. wid
end
