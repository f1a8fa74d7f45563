--[[ write_commit: a commit that holds the lease takes effect: the task is done with its
  result, leaves the lease set and the worker's held set, and its job counts one more done
  task; j: the job's {state, app, total, done, failed, cancelled, finished_ms, leased} read
  once by complete_task (nothing else touches them in between). Returns the job's new
  done count.
]]
--- @include "common"
local function write_commit(ctx, K, tid, j, c, now)
  local warm = c.warm == '1'
  if warm then
    redis.call('HSET', K.task, 'state', 'done', 'result', c.result_key, 'finished_ms', int(now),
      'run_s', num(c.run_s), 'warm', '1', 'meta', c.provenance)
  else
    redis.call('HSET', K.task, 'state', 'done', 'result', c.result_key, 'finished_ms', int(now),
      'run_s', num(c.run_s), 'warm', '0', 'meta', c.provenance, 'cold_s', num(c.run_s))
  end
  redis.call('ZREM', K.leases, tid)
  redis.call('SREM', K.held, tid)
  redis.call('HINCRBY', ctx.inflight, j[2], -1)
  local done_n = (tonumber(j[4]) or 0) + 1
  redis.call('HSET', K.job, 'leased', int((tonumber(j[8]) or 0) - 1), 'done', int(done_n))
  return done_n
end
