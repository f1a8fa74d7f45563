--[[ budget_grant: how many of a claim's `grant` first candidates (costs) keep the job's
  predicted spend within its budget (dollars): its field `spent` (what the claims so far
  predicted) plus dollars_per_cost (the worker's price x its time per cost unit, in
  dollars) for each one's cost. None fits: the job waits for cheaper capacity and says so
  once (event budget_held, its field held_ms).
]]
--- @include "common"
local function budget_grant(ctx, job_key, job_id, wid, budget, dollars_per_cost, costs, grant,
    now)
  local spent = num_in(redis.call('HGET', job_key, 'spent'), 0, 1e15) or 0
  local C, fits = 0, 0
  for m = 1, grant do
    C = C + costs[m]
    if spent + dollars_per_cost * C > budget then
      break
    end
    fits = m
  end
  if fits == 0 and redis.call('HSETNX', job_key, 'held_ms', int(now)) == 1 then
    emit(ctx, 'budget_held', 'job', job_id, 'worker', wid, 'budget', num(budget), 'spent',
      num(spent))
  end
  return fits
end
