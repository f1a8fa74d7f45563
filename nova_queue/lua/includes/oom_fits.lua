--[[ oom_fits: for a task that ran out of memory (t: its CLAIM_TASK read; oom_memory: the
  largest device memory, bytes, of the workers it failed on; oom_batch: the smallest batch
  it failed in): true if the claiming worker has more device memory (s.memory) or takes a smaller
  batch (a.k); false if it has neither but a live worker of the app that still claims
  (still_claiming: a declared memory alone holds no task) has more memory (the task waits
  for it); nil if no such worker is live (the task may run here again, as any failed task).
  Looks at MAX_LISTED of the app's live workers, once per scan.
]]
--- @include "common"
--- @include "still_claiming"
--- @include "members_upto"
local function oom_fits(prefix, s, app_workers_key, a, t, now)
  local need = num_in(t[CLAIM_TASK.oom_memory], 0, 1e18) or 0
  if (s.memory or 0) > need or a.k < (int_in(t[CLAIM_TASK.oom_batch], 1, MAX_CLAIM_K) or 1) then
    return true
  end
  s.larger = s.larger or {}
  if s.larger[need] == nil then
    s.larger[need] = false
    for _, v in ipairs(members_upto(app_workers_key, MAX_LISTED)) do
      local memory_total, claim_ms, busy_until_ms = unpack(v ~= a.wid and redis.call('HMGET',
        prefix .. 'worker:' .. v, 'memory_total', 'claim_ms', 'busy_until_ms') or {})
      if (num_in(memory_total, 0, 1e18) or 0) > need and still_claiming(prefix, v, claim_ms,
          busy_until_ms, now - math.max(a.ttl_ms, MIN_CLAIMING_MS)) then
        s.larger[need] = true
        break
      end
    end
  end
  if s.larger[need] then
    return false
  end
  return nil
end
