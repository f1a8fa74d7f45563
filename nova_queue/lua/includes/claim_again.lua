--[[ claim_again: a retried claim whose reply was lost (its first attempt id is the worker's
  last_claim) gets the same leases back, not new ones. Returns the JSON list of the held
  tasks (at most MAX_HELD_VISIT: a worker holds a few, and the set is writable) still
  leased under one of `ids`, as a primary or a backup attempt (claim-12's lease fields), or
  nil when none is.
]]
--- @include "members_upto"
local function claim_again(prefix, held_key, ids)
  local wanted = {}
  for _, id in ipairs(ids) do
    wanted[id] = true
  end
  local again = {}
  for _, tid in ipairs(members_upto(held_key, MAX_HELD_VISIT)) do
    local state, input, cost, attempt_count, attempt_id, lease_gen, deadline_ms, predicted_s,
      run_deadline_ms, b_attempt_id, b_lease_gen, b_deadline_ms, b_predicted_s,
      b_run_deadline_ms = unpack(redis.call('HMGET', prefix .. 'task:' .. tid, 'state', 'input',
      'cost', 'attempt_count', 'attempt_id', 'lease_gen', 'deadline_ms', 'predicted_s',
      'run_deadline_ms', 'b_attempt_id', 'b_lease_gen', 'b_deadline_ms', 'b_predicted_s',
      'b_run_deadline_ms'))
    local primary = state == 'leased' and wanted[attempt_id]
    if primary or (state == 'leased' and wanted[b_attempt_id]) then
      local job_id = job_of(tid)
      if not primary then -- a backup attempt: its own fields
        attempt_id, lease_gen, deadline_ms, predicted_s, run_deadline_ms = b_attempt_id,
          b_lease_gen, b_deadline_ms, b_predicted_s, b_run_deadline_ms
      end
      again[#again + 1] = {
        tid = tid, job = job_id, index = tonumber(index_of(tid)), input = input,
        cost = num_in(cost, MIN_COST, MAX_COST) or 1,
        params = redis.call('HGET', prefix .. 'job:' .. job_id, 'params') or '{}',
        attempt = tonumber(attempt_count), attempt_id = attempt_id,
        lease_gen = tonumber(lease_gen), deadline_ms = deadline_ms,
        predicted_s = tonumber(predicted_s) or cjson.null, run_deadline_ms = run_deadline_ms,
        backup = not primary,
      }
    end
  end
  if #again > 0 then
    return cjson.encode(again)
  end
  return nil
end
