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
    if type(r) ~= 'table' or type(r[1]) ~= 'string' or #r[1] > 32 or type(r[3]) ~= 'table'
        or #r[3] < 1 or #r[3] > MAX_REQUIRES or (r[2] ~= 'in' and r[2] ~= '>=' and r[2] ~= '<=') then
      return false
    end
  end
  return true
end
