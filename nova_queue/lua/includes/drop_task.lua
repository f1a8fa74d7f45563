--[[ drop_task: a pending task the candidate scan meets but must not lease leaves the
  pending set: its job was cancelled (the task is cancelled), or its input was written by
  hand past enqueue's limit (the task fails). j = the job's cached CLAIM_JOB read
  (consider_job); its pending count is kept current for the counts write_leases writes.
]]
--- @include "common"
local function drop_task(ctx, pending_key, now, tid, task_key, job_id, j)
  local job_key = ctx.prefix .. 'job:' .. job_id
  redis.call('ZREM', pending_key, tid)
  if j[CLAIM_JOB.state] == 'cancelled' then
    redis.call('HSET', task_key, 'state', 'cancelled')
    redis.call('HINCRBY', job_key, 'cancelled', 1)
  else
    redis.call('HSET', task_key, 'state', 'failed', 'input', '', 'error_kind', 'error',
      'error', 'input longer than ' .. MAX_INPUT_BYTES .. ' bytes')
    redis.call('ZADD', ctx.failed, now, tid)
    redis.call('HINCRBY', job_key, 'failed', 1)
  end
  redis.call('HINCRBY', job_key, 'pending', -1)
  j[CLAIM_JOB.pending] = (tonumber(j[CLAIM_JOB.pending]) or 0) - 1
  finish_job_if_done(ctx, job_key, job_id, now)
end
