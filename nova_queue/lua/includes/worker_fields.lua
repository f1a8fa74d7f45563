--[[ worker_fields: a registering worker's own fields (decoded JSON) as {name, value, ...}
  for HSET, or nil and what is wrong: at most MAX_FIELDS, names [a-z][a-z0-9_]{0,31} and
  none of those the scripts own, values strings or numbers.
]]
--- @include "common"
-- fields written by the scripts, never by a worker's registration
local OWNED = {
  id = true, apps = true, state = true, joined_ms = true, left_ms = true, last_seen_ms = true,
  busy_until_ms = true, tasks_done = true, failures = true, oom = true, claims = true,
  last_claim = true, last_done_ms = true, last_error = true, fail_streak = true,
  fast_streak = true, streak_since_ms = true, streak_tids = true, blamed = true,
  quarantined = true, quarantine_reason = true, quarantined_ms = true,
  quarantine_until_ms = true, cooldown_ms = true, probe_tid = true, model_loads = true,
  protocol = true, claim_ms = true, free_n = true, free_since_ms = true, cannot_run = true,
  trust = true, verifies = true,
}

local function worker_fields(fields)
  local args, n = {}, 0
  for name, value in pairs(fields) do
    n = n + 1
    if n > MAX_FIELDS then
      return nil, 'at most ' .. MAX_FIELDS .. ' worker fields'
    end
    if type(name) ~= 'string' or not string.match(name, '^[a-z][a-z0-9_]*$') or #name > 32
        or OWNED[name] then
      return nil, 'invalid worker field name'
    end
    if type(value) ~= 'string' and type(value) ~= 'number' then
      return nil, 'worker field ' .. name .. ' must be a string or a number'
    end
    args[#args + 1] = name
    args[#args + 1] = type(value) == 'number' and num(value) or value
  end
  return args
end
