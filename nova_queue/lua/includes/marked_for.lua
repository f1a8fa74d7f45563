--[[ marked_for: whether a worker's `cannot_run` field (raw) holds a live mark for `app` and
  `model` (live_marks). A forged field can cost a claim a decode of MAX_MARKS_BYTES, so at
  most budget.n fields are decoded per call (the caller's count, shared by its workers);
  past it a field counts as no mark (that worker is weighed as if it had none).
]]
--- @include "live_marks"
local function marked_for(raw, app, model, now, budget)
  if budget.n <= 0 then
    return false
  end
  budget.n = budget.n - 1
  local _, of_app = live_marks(raw, now, app)
  return of_app[model] ~= nil
end
