--[[ keep_recent: `list` (comma-separated ids, oldest first) with `id` appended, keeping the
  last MAX_STREAK ids.
]]
--- @include "common"
local function keep_recent(list, id)
  local ids = {}
  for x in string.gmatch(string.sub(list or '', 1, 81 * MAX_STREAK), '[^,]+') do
    ids[#ids + 1] = x
  end
  ids[#ids + 1] = id
  return table.concat(ids, ',', math.max(1, #ids - MAX_STREAK + 1))
end
