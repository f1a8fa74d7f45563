--[[ staged_job: the job a later call of enqueue-9 adds n tasks to: it exists, is still
  staging, has valid fields and exactly a.start tasks staged, and takes n more. K, a:
  enqueue-9's KEYS and ARGV by name.
  Returns the job's {app, priority, total, seq0, owner}, or nil and the reply refusing the
  call.
]]
--- @include "common"
local function staged_job(K, a, n)
  local state, app, priority, total, staged, seq0, owner = unpack(redis.call('HMGET', K.job,
    'state', 'app', 'priority', 'total', 'staged', 'seq0', 'owner'))
  if not state then
    return nil, { CODE.UNKNOWN_JOB, a.job_id }
  end
  if state ~= 'staging' then
    return nil, { CODE.BAD_STATE, 'job ' .. a.job_id .. ' is ' .. state .. ', not staging' }
  end
  priority = int_in(priority, -1000, 1000)
  total, seq0 = int_in(total, 1, MAX_JOB_TASKS), int_in(seq0, 0, 2 ^ 42)
  if not is_name(app, 64) or not priority or not total or not seq0 then
    return nil, { CODE.BAD_STATE, 'job ' .. a.job_id .. ' has invalid fields' }
  end
  if K.pending ~= a.prefix .. 'pending:' .. app then
    return nil, bad_input("KEYS[5] is not the pending set of the job's app")
  end
  if tonumber(staged) ~= a.start then
    return nil, { CODE.BAD_STATE, 'chunk starts at task ' .. a.start .. ' but '
      .. tostring(staged) .. ' are staged' }
  end
  if a.start + n > total then
    return nil, bad_input('more tasks than the job declares (' .. total .. ')')
  end
  return { app = app, priority = priority, total = total, seq0 = seq0, owner = owner or '' }
end
