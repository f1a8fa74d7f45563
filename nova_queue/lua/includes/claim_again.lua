--[[ claim_again: a retried claim whose reply was lost (its first attempt id is the worker's
  last_claim) gets the same leases back, not new ones. Returns the JSON list of the held
  tasks still leased under one of `ids` (claim-12's lease fields), or nil when none is.
]]
--- @include "held_members"
local function claim_again(prefix, held_key, ids)
  local wanted = {}
  for _, id in ipairs(ids) do
    wanted[id] = true
  end
  local again = {}
  for _, tid in ipairs(held_members(held_key)) do
    local t = redis.call('HMGET', prefix .. 'task:' .. tid, 'state', 'attempt_id', 'lease_gen',
      'attempt_count', 'input', 'cost', 'deadline_ms', 'predicted_s')
    if t[1] == 'leased' and wanted[t[2]] then
      local job_id = job_of(tid)
      again[#again + 1] = {
        tid = tid, job = job_id, index = tonumber(index_of(tid)), input = t[5],
        cost = num_in(t[6], MIN_COST, MAX_COST) or 1,
        params = redis.call('HGET', prefix .. 'job:' .. job_id, 'params') or '{}',
        lease_gen = tonumber(t[3]), attempt_id = t[2], attempt = tonumber(t[4]),
        deadline_ms = t[7], predicted_s = tonumber(t[8]) or cjson.null,
      }
    end
  end
  if #again > 0 then
    return cjson.encode(again)
  end
  return nil
end
