--[[ deadline_grant: how many of its candidates (costs, of one job) the claiming worker gets
  under the job's deadline, `D` ms from now: the least-cost plan for identical workers'
  tasks fills the workers of the lowest price per task first, each with what it finishes by
  the deadline. So the claiming worker (t_w s per cost unit, `price` per hour, `load_ms`
  before its first task) gets its m-th candidate only while it finishes it by D and the
  workers cheaper per task than it (price x task time; of equal ones the faster) finish
  fewer than R - m + 1 of the job's R pending tasks by D. The others (fastest_others:
  task_ms and free_ms per worker, ms; `prices` per hour) finish floor((D - free) / task)
  each. Returns the grant (0: cheaper workers make the deadline without it), or nil when
  the whole pool, this worker included, cannot finish the R tasks by D (the caller then
  grants as for the fastest finish). Pure arithmetic (no Redis call):
  tests/core/test_cost_placement.py runs it alone (scripts.include_source).
]]
local function deadline_grant(task_ms, free_ms, prices, t_w, price, costs, R, D, load_ms)
  local my_task = t_w * costs[1] * 1000
  local my_rate = price * my_task
  local cheaper, all = 0, 0
  for k = 1, #task_ms do
    local x = (D - free_ms[k]) / task_ms[k]
    local by_deadline = x > 0 and math.floor(x + 1e-9) or 0
    local rate = prices[k] * task_ms[k]
    all = all + by_deadline
    if rate < my_rate or (rate == my_rate and task_ms[k] < my_task) then
      cheaper = cheaper + by_deadline
    end
  end
  local mine = (D - load_ms) / my_task
  if all + (mine > 0 and math.floor(mine + 1e-9) or 0) < R then
    return nil -- out of the pool's reach: as fast as it can
  end
  local grant, C = 0, 0
  for m = 1, #costs do
    C = C + costs[m]
    if load_ms + t_w * C * 1000 > D or cheaper >= R - m + 1 then
      break -- it would finish this one late, or cheaper workers finish the rest in time
    end
    grant = m
  end
  return grant
end
