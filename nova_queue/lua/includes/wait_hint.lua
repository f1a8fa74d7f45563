--[[ wait_hint: when a worker that got nothing should ask again (ms, WAIT_MS.MIN ..
  WAIT_MS.MAX): when the answer can change, i.e. when another worker frees up: a busy one
  at its predicted free time, an idle one after the task it is about to take.
]]
--- @include "common"
local function wait_hint(others)
  local hint = WAIT_MS.MAX
  for _, o in ipairs(others) do
    local next_ms = o[2] > 0 and o[2] or o[1]
    if next_ms < hint then
      hint = next_ms
    end
  end
  return int(math.max(hint, WAIT_MS.MIN))
end
