--[[ requires_ok: whether `text` is the JSON of a job's requirements as enqueue writes them:
  a list of at most MAX_REQUIRES {key, op, values} entries, op 'in', '>=' or '<=', values a
  list of 1 to MAX_REQUIRES strings or numbers.
]]
--- @include "decode_list"
local function requires_ok(text)
  local list = decode_list(text, nil)
  if not list or #list > MAX_REQUIRES then
    return false
  end
  for _, r in ipairs(list) do
    local key, op, values = unpack(type(r) == 'table' and r or {}, 1, 3)
    if type(key) ~= 'string' or #key > 32 or type(values) ~= 'table' or #values < 1
        or #values > MAX_REQUIRES or (op ~= 'in' and op ~= '>=' and op ~= '<=') then
      return false
    end
  end
  return true
end
