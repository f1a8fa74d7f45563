--[[ delete_staged: deletes a job that was never published (its enqueue failed part way,
  or was abandoned), at most `budget` of its tasks per call, from its highest index down. Its
  tasks are 0 .. staged-1, but `staged` is a writable field: the walk stops at the first
  index without a task hash (the data present), whatever `staged` says. Tasks a publish in
  progress already moved into the pending set leave it too.
  Returns tasks deleted, tasks left (0: the job, its stage set and its staging entry are gone).
]]
--- @include "common"
local function delete_staged(prefix, staging_key, job_key, job_id, budget)
  local staged, app = unpack(redis.call('HMGET', job_key, 'staged', 'app'))
  local index = (int_in(staged, 0, MAX_JOB_TASKS) or 0) - 1
  local pending_key = is_name(app, 64) and (prefix .. 'pending:' .. app)
  local stage_key = prefix .. 'stage:' .. job_id
  local tids = {}
  while index >= 0 and #tids < budget do
    local tid = job_id .. ':' .. index
    if redis.call('DEL', prefix .. 'task:' .. tid) == 0 then
      index = -1 -- no such task: nothing below it is this job's to walk
    else
      tids[#tids + 1] = tid
      index = index - 1
    end
  end
  for from = 1, #tids, 1000 do
    local last = math.min(from + 999, #tids)
    redis.call('ZREM', stage_key, unpack(tids, from, last))
    if pending_key then
      redis.call('ZREM', pending_key, unpack(tids, from, last))
    end
  end
  local deleted = #tids
  if index < 0 then
    redis.call('UNLINK', job_key, stage_key) -- freed in the background if large
    redis.call('ZREM', staging_key, job_id)
    return deleted, 0
  end
  redis.call('HSET', job_key, 'staged', index + 1)
  return deleted, index + 1
end
