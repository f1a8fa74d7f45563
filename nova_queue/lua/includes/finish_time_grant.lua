--[[ finish_time_grant: the completion-time rule of claim-12's header, worker by worker:
  the claiming worker (estimate t_w) gets its m-th candidate while the others
  (fastest_others: task_ms, ms per task, and free_ms, ms until free, per worker) finish
  fewer than R - m + 1 tasks strictly before it would finish the m first; `load_ms`: how
  long it loads the job's model first (0 when it holds it warm). Pure arithmetic (no
  Redis call): tests/core/test_scheduler_maths.py runs it alone (scripts.include_source).
  Returns how many it gets (0: none now).
]]
local function finish_time_grant(task_ms, free_ms, t_w, costs, R, load_ms)
  local grant, C = 0, 0
  for m = 1, #costs do
    C = C + costs[m]
    local finish = load_ms + t_w * C * 1000 -- ms from now
    local s = 0
    for k = 1, #task_ms do
      local x = (finish - free_ms[k]) / task_ms[k]
      if x > 0 then
        s = s + math.ceil(x - 1e-9) - 1 -- tasks worker k finishes strictly before this one would
      end
    end
    if s >= R - m + 1 then
      break
    end
    grant = m
  end
  return grant
end
