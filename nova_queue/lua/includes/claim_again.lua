--[[ claim_again: a retried claim whose reply was lost (its first attempt id is the worker's
  last_claim) gets the same leases back, not new ones. Returns the JSON list of the held
  tasks still leased under one of `ids`, as a primary or a backup attempt (claim-12's lease
  fields), or nil when none is.
]]
--- @include "held_members"
local function claim_again(prefix, held_key, ids)
  local wanted = {}
  for _, id in ipairs(ids) do
    wanted[id] = true
  end
  local again = {}
  for _, tid in ipairs(held_members(held_key)) do
    local t = redis.call('HMGET', prefix .. 'task:' .. tid, 'state', 'input', 'cost',
      'attempt_count', 'attempt_id', 'lease_gen', 'deadline_ms', 'predicted_s',
      'run_deadline_ms', 'b_attempt_id', 'b_lease_gen', 'b_deadline_ms', 'b_predicted_s',
      'b_run_deadline_ms')
    local at = t[1] == 'leased' and ((wanted[t[5]] and 5) or (wanted[t[10]] and 10))
    if at then
      local job_id = job_of(tid)
      again[#again + 1] = {
        tid = tid, job = job_id, index = tonumber(index_of(tid)), input = t[2],
        cost = num_in(t[3], MIN_COST, MAX_COST) or 1,
        params = redis.call('HGET', prefix .. 'job:' .. job_id, 'params') or '{}',
        attempt = tonumber(t[4]), attempt_id = t[at], lease_gen = tonumber(t[at + 1]),
        deadline_ms = t[at + 2], predicted_s = tonumber(t[at + 3]) or cjson.null,
        run_deadline_ms = t[at + 4], backup = at == 10,
      }
    end
  end
  if #again > 0 then
    return cjson.encode(again)
  end
  return nil
end
