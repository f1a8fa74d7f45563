--[[ decode_object: a JSON object of at most MAX_META_BYTES as a table, or nil. ]]
--- @include "common"
local function decode_object(text)
  if type(text) ~= 'string' or #text > MAX_META_BYTES then
    return nil
  end
  local ok, value = pcall(cjson.decode, text)
  if ok and type(value) == 'table' then
    return value
  end
  return nil
end
