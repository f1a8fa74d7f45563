--[[ batch_job: the job's {state, app, total, done, failed, cancelled, finished_ms, leased,
  owner} for a batch of commits, read once per batch (b.jobs; commit_fast counts its
  commits into it, flush_batch writes them and forgets what it read).
]]
--- @include "common"
local function batch_job(ctx, b, job_id)
  local j = b.jobs[job_id]
  if not j then
    j = redis.call('HMGET', ctx.prefix .. 'job:' .. job_id, 'state', 'app', 'total', 'done',
      'failed', 'cancelled', 'finished_ms', 'leased', 'owner')
    b.jobs[job_id] = j
  end
  return j
end
