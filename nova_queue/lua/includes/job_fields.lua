--[[ job_fields: enqueue-9's job fields (ARGV[5], JSON) checked, and their app's pending set
  checked against KEYS[5] (pending_key). Returns {app, params, priority, max_attempts,
  total, name, timeout_s ('' when the run-time limit derives from predictions), requires
  (JSON text of the requirements, '' for none: a list of at most MAX_REQUIRES
  [key, op, values] entries), owner (fair share), model (what its tasks need warm; ''
  for none) and retention_s}, or nil and what is wrong.
]]
--- @include "requires_ok"
local function job_fields(text, prefix, pending_key)
  local ok, f = false, nil
  if #text <= 2 * MAX_META_BYTES then
    ok, f = pcall(cjson.decode, text)
  end
  if not ok or type(f) ~= 'table' then
    return nil, 'job fields are not a JSON object of at most ' .. 2 * MAX_META_BYTES .. ' bytes'
  end
  local priority, total = int_in(f.priority or 0, -1000, 1000), int_in(f.total, 1, MAX_JOB_TASKS)
  local max_attempts = int_in(f.max_attempts, 1, MAX_ATTEMPTS)
  local retention_s = int_in(f.retention_s or DEFAULT_RETENTION_S, 0, MAX_RETENTION_S)
  if not is_name(f.app, 64) then
    return nil, 'invalid app name'
  end
  if pending_key ~= prefix .. 'pending:' .. f.app then
    return nil, "KEYS[5] is not the pending set of the job's app"
  end
  if not priority then
    return nil, 'priority must be an integer from -1000 to 1000'
  end
  if not total then
    return nil, 'a job needs 1 to ' .. MAX_JOB_TASKS .. ' tasks'
  end
  if not max_attempts then
    return nil, 'max_attempts must be an integer from 1 to ' .. MAX_ATTEMPTS
  end
  if not retention_s then
    return nil, 'retention_s must be an integer from 0 to ' .. MAX_RETENTION_S
  end
  if (f.params ~= nil and (type(f.params) ~= 'string' or #f.params > MAX_PARAMS_BYTES))
      or (f.name ~= nil and (type(f.name) ~= 'string' or #f.name > MAX_TEXT_BYTES)) then
    return nil, 'params must be a JSON string of at most ' .. MAX_PARAMS_BYTES
      .. ' bytes and name a string of at most ' .. MAX_TEXT_BYTES
  end
  local timeout_s = f.timeout_s and num_in(f.timeout_s, 0.001, MAX_TIMEOUT_MS / 1000)
  if f.timeout_s and not timeout_s then
    return nil, 'timeout_s must be a number of seconds from 0.001 to ' .. MAX_TIMEOUT_MS / 1000
  end
  local requires = f.requires or ''
  if type(requires) ~= 'string' or #requires > MAX_TEXT_BYTES or (requires ~= ''
      and not requires_ok(requires)) then
    return nil, 'requires must be the JSON text of at most ' .. MAX_REQUIRES
      .. ' [key, op, values] requirements'
  end
  for _, name in ipairs({ f.owner or '', f.model or '' }) do
    if type(name) ~= 'string' or #name > 128 or not string.match(name, '^[A-Za-z0-9_.:@+/%-]*$') then
      return nil, 'owner and model must be at most 128 of A-Z a-z 0-9 _ . : @ + / -'
    end
  end
  return { app = f.app, params = f.params or '{}', priority = priority,
    max_attempts = max_attempts, total = total, name = f.name or '',
    timeout_s = timeout_s and num(timeout_s) or '', requires = requires, owner = f.owner or '',
    model = f.model or '', retention_s = retention_s }
end
