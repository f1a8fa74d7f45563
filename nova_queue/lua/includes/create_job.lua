--[[ create_job: enqueue-9's first call of a job (n tasks in this call): checks the job
  fields (job_fields, job_terms: its deadline and budget) and the chunk against them, then
  writes the job hash in state 'staging' with its block of the seq counter and, unless this
  call also publishes, its staging entry. K, a: enqueue-9's KEYS and ARGV by name.
  Returns the job's {app, priority, total, seq0, owner}, or nil and the reply refusing the
  call.
]]
--- @include "job_fields"
--- @include "job_terms"
local function create_job(K, a, n, now)
  if redis.call('EXISTS', K.job) == 1 then
    return nil, { CODE.JOB_EXISTS, a.job_id }
  end
  local f, bad = job_fields(a.fields, a.prefix, K.pending)
  if not f then
    return nil, bad_input(bad)
  end
  local deadline_ms, budget, why = job_terms(cjson.decode(a.fields), now)
  if not deadline_ms then
    return nil, bad_input(why)
  end
  if a.start ~= 0 then
    return nil, { CODE.BAD_STATE, 'the first chunk must start at task 0' }
  end
  if n > f.total or (a.publish and n ~= f.total) then
    return nil, bad_input('job declares ' .. f.total .. ' tasks but ' .. n .. ' were sent')
  end
  local seq0 = redis.call('INCRBY', K.seq, f.total) - f.total
  redis.call('HSET', K.job, 'id', a.job_id, 'app', f.app, 'params', f.params,
    'priority', int(f.priority), 'max_attempts', int(f.max_attempts), 'name', f.name,
    'created_ms', int(now), 'state', 'staging', 'total', int(f.total), 'staged', 0,
    'pending', 0, 'leased', 0, 'done', 0, 'failed', 0, 'cancelled', 0, 'seq0', int(seq0),
    'timeout_s', f.timeout_s, 'requires', f.requires, 'owner', f.owner, 'model', f.model,
    'retention_s', int(f.retention_s), 'deadline_ms', deadline_ms, 'budget', budget)
  if not a.publish then
    redis.call('ZADD', K.staging, now, a.job_id)
  end
  return { app = f.app, priority = f.priority, total = f.total, seq0 = seq0, owner = f.owner }
end
