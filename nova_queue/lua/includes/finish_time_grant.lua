--[[ finish_time_grant: the completion-time rule of claim-12's header, worker by worker:
  the claiming worker (estimate t_w) gets its m-th candidate while the others (from
  fastest_others) finish fewer than R - m + 1 tasks strictly before it would finish the
  m first; `load_ms`: how long it loads the job's model first (0 when it holds it warm).
  Returns how many it gets (0: none now).
]]
local function finish_time_grant(others, t_w, costs, R, load_ms)
  local grant, C = 0, 0
  for m = 1, #costs do
    C = C + costs[m]
    local finish = load_ms + t_w * C * 1000 -- ms from now
    local s = 0
    for _, o in ipairs(others) do
      local x = (finish - o[2]) / o[1]
      if x > 0 then
        s = s + math.ceil(x - 1e-9) - 1 -- tasks o finishes strictly before this worker would
      end
    end
    if s >= R - m + 1 then
      break
    end
    grant = m
  end
  return grant
end
