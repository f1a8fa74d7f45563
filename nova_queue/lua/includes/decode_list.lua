--[[ decode_list: a JSON field (a job's `requires`, a worker's `labels`) as a table, or
  `empty` when it is missing, too long (over 8192 bytes) or not JSON of that kind.
]]
--- @include "common"
local function decode_list(raw, empty)
  if type(raw) ~= 'string' or raw == '' or #raw > MAX_TEXT_BYTES then
    return empty
  end
  local ok, v = pcall(cjson.decode, raw)
  if ok and type(v) == 'table' then
    return v
  end
  return empty
end
