--[[ check_task_pairs: enqueue-9's task pairs (input, cost) from ARGV[8] on, checked before
  anything is written. start: the index of the chunk's first task (for messages).
  Returns their number, or nil and what is wrong.
]]
--- @include "common"
local function check_task_pairs(A, start)
  if #A > 7 + 2 * MAX_CHUNK then
    return nil, 'at most ' .. MAX_CHUNK .. ' tasks per call'
  end
  local n = (#A - 7) / 2
  if n ~= math.floor(n) then
    return nil, 'task inputs and costs must come in pairs'
  end
  local valid_cost -- the last cost found valid: a chunk's costs are mostly one string, and
  -- comparing two Lua strings is one pointer comparison where tonumber is a strtod
  for i = 0, n - 1 do
    if #A[8 + 2 * i] > MAX_INPUT_BYTES then
      return nil, 'task ' .. (start + i) .. ': input longer than ' .. MAX_INPUT_BYTES .. ' bytes'
    end
    local cost = A[9 + 2 * i]
    if cost ~= valid_cost then
      if not num_in(cost, MIN_COST, MAX_COST) then
        return nil, 'task ' .. (start + i) .. ': cost must be a number from 1e-9 to 1e9'
      end
      valid_cost = cost
    end
  end
  return n
end
