--[[ queue_job: a job with pending tasks is in its owner's queue of the app
  (app:<app>:owner:<owner>, job ids scored by their first task's score: priority, then
  FIFO) and its owner in the app's owners set, which fair share walks (owner_jobs). Called
  when a job is published and when one of its tasks is pending again; a claim drops a job
  whose tasks are all taken (and an owner with none left). Jobs without an owner count as
  the owner ''.
]]
--- @include "common"
local function queue_job(prefix, job_id, app, owner, priority, seq0)
  owner = owner or ''
  local base = prefix .. 'app:' .. app .. ':'
  redis.call('ZADD', base .. 'owner:' .. owner, 'NX', task_score(priority, seq0, job_id .. ':0'),
    job_id)
  redis.call('SADD', base .. 'owners', owner)
end
