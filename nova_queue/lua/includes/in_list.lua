--[[ in_list: whether `wid` is in `list`, a task's comma-separated list (oom: worker ids;
  failed_on: identities, ident_of; false or nil when the field is missing).
]]
--- @include "common"
local function in_list(list, wid)
  return type(list) == 'string' and string.find(',' .. list .. ',', ',' .. wid .. ',', 1, true) ~= nil
end
