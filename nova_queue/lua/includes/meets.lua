--[[ meets: whether a worker's labels (a table from its `labels` field) meet a job's
  requirements (a list of {key, op, values}: op 'in' (the label is one of the values), '>='
  or '<=' (the label is a number at least / at most values[1]); nova_queue/placement.py is
  the same rule in Python). A missing label meets nothing. Weighs MAX_REQUIRES of each.
]]
--- @include "common"
local function meets(labels, requires)
  for i, r in ipairs(requires) do
    if i > MAX_REQUIRES then
      break
    end
    local key, op, values = unpack(type(r) == 'table' and r or {}, 1, 3)
    local have = key ~= nil and labels[key]
    if have == nil or have == false or type(values) ~= 'table' then
      return false
    end
    if op == 'in' then
      local found = false
      for j, v in ipairs(values) do
        if j > MAX_REQUIRES then
          break
        end
        found = found or tostring(have) == tostring(v)
      end
      if not found then
        return false
      end
    else
      local a, b = tonumber(have), tonumber(values[1]) -- the bound
      if not a or not b or (op == '>=' and a < b) or (op == '<=' and a > b)
          or (op ~= '>=' and op ~= '<=') then
        return false
      end
    end
  end
  return true
end
