--[[ write_tasks: the n tasks of one enqueue-9 call (pairs input, cost from A[8] on): a
  pending task hash each, and their ids into `target` (the pending set for a one-call job,
  else the stage set) scored as in the pending set, ZADD in batches of up to 1000 members:
  one call per batch, not per task. a: enqueue-9's ARGV by name; job: its {priority, seq0}.
  Numbers become text by '%d' (scores stay below 2^53): Lua's number-to-string ('%.14g')
  and '%.0f' take the C library's floating-point printing, 12% of an enqueue's instructions.
]]
--- @include "common"
local function write_tasks(target, a, job, A, n)
  -- one score base per call: seq = seq0 + index + 1 (requeues recompute it the same way)
  local base = (1000 - job.priority) * SCORE_PRIORITY_STEP + job.seq0 + 1
  local task_prefix = a.prefix .. 'task:' .. a.job_id .. ':'
  local tid_prefix = a.job_id .. ':'
  local batch, b = {}, 0
  for i = 0, n - 1 do
    local index = a.start + i
    local id = string.format('%d', index)
    redis.call('HSET', task_prefix .. id, 'state', 'pending', 'input', A[8 + 2 * i],
      'cost', A[9 + 2 * i])
    batch[b + 1], batch[b + 2] = string.format('%d', base + index), tid_prefix .. id
    b = b + 2
    if b == 2000 or i == n - 1 then
      redis.call('ZADD', target, unpack(batch, 1, b))
      b = 0
    end
  end
end
