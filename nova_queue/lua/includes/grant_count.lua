--[[ grant_count: how many of the candidates (the scan s: their costs, in queue order) the
  claiming worker gets under claim-12's policy, with R tasks pending; or 0 and when to ask
  again (ms: when another worker frees up, WAIT_MS.MIN .. WAIT_MS.MAX). No estimate at
  all: one (explore). Fast path, O(log n): while R is large the others cannot finish the
  queue first, and all are granted without visiting a worker;
  else finish_time_grant weighs the fastest_others that may take the head candidate (not
  those it failed or ran out of memory on, nor those that stopped claiming: me.window_ms).
]]
--- @include "decode_list"
--- @include "fastest_others"
--- @include "finish_time_grant"
local function grant_count(fleet_key, prefix, wid, t_w, measured, s, R, now, me)
  local costs = s.costs
  if not t_w then
    return 1 -- explore: no data at all
  end
  if not measured then
    -- a measured estimate is already the fleet score (complete keeps it there)
    redis.call('ZADD', fleet_key, 'XX', num(t_w), wid)
  end
  local c, kk, C = costs[1], #costs, 0
  for i = 1, kk do
    C = C + costs[i]
  end
  local N = redis.call('ZCARD', fleet_key)
  local _, fastest = unpack(redis.call('ZRANGE', fleet_key, '0', '0', 'WITHSCORES'))
  local t_min = math.max(tonumber(fastest or t_w) or t_w, 1e-9)
  if N == 0 or N * t_w * C / (t_min * c) < R - kk + 1 then
    return kk -- fast path
  end
  local head, j = s.tasks[1], s.jobs[s.job]
  local oom, failed_on = head[CLAIM_TASK.oom], head[CLAIM_TASK.failed_on]
  local skip = (oom or failed_on) and ((oom or '') .. ',' .. (failed_on or ''))
  local requires = decode_list(j[CLAIM_JOB.requires], nil)
  local model = j[CLAIM_JOB.model] ~= '' and j[CLAIM_JOB.model] or nil -- loaded first elsewhere
  local task_ms, free_ms = fastest_others(fleet_key, prefix, wid, c, now, now - me.window_ms,
    skip, requires and #requires > 0 and requires or nil, model, me.app, measured and t_w or nil)
  local grant = finish_time_grant(task_ms, free_ms, t_w, costs, R,
    model and me.warm ~= model and me.load_s * 1000 or 0)
  if grant > 0 then
    return grant
  end
  -- when to ask again: when the answer can change, i.e. when another worker frees up (a
  -- busy one at its predicted free time, an idle one after the task it is about to take)
  local hint = WAIT_MS.MAX
  for k = 1, #task_ms do
    hint = math.min(hint, free_ms[k] > 0 and free_ms[k] or task_ms[k])
  end
  return 0, int(math.max(hint, WAIT_MS.MIN))
end
