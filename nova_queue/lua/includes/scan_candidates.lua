--[[ scan_candidates: the tasks a claim may lease, in queue order (consider_pending decides
  each). Reads the first k members of the pending set and, only when some were skipped,
  32 more: never more, whatever the set holds. Returns s: tids, tasks (each the task's
  {cost, oom, input, lease_gen, attempt_count, state, gen_top, failed_on}), costs, jobs
  (job id -> {state, params, pending, leased, timeout_s}) and removed (members that left
  the set).
]]
--- @include "consider_pending"
local function scan_candidates(ctx, K, a, now)
  local s = { tids = {}, tasks = {}, costs = {}, jobs = {}, removed = 0, live = nil }
  local offset, window = 0, a.k
  for _ = 1, 2 do
    local scan = redis.call('ZRANGE', K.pending, offset, offset + window - 1)
    for _, tid in ipairs(scan) do
      if #s.tids >= a.k then
        break
      end
      consider_pending(ctx, K, a.wid, s, tid, now)
    end
    if #s.tids >= a.k or #scan < window then
      break
    end
    offset, window = offset + window - s.removed, 32
  end
  return s
end
