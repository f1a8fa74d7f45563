--[[ write_commit: a single commit that holds the lease takes effect: the task is done
  (write_done), leaves the lease set and the worker's held set, and its job counts one more
  done task and one fewer leased (in j, complete_task's COMMIT_JOB read, and in the job
  hash: nothing else touches them in between). commit_fast is the batch's counterpart.
]]
--- @include "write_done"
local function write_commit(ctx, K, tid, j, c, now)
  write_done(K.task, c, int(now))
  redis.call('ZREM', K.leases, tid)
  redis.call('SREM', K.held, tid)
  redis.call('HINCRBY', ctx.inflight, j[COMMIT_JOB.app], -1)
  j[COMMIT_JOB.done] = int((tonumber(j[COMMIT_JOB.done]) or 0) + 1)
  j[COMMIT_JOB.leased] = int((tonumber(j[COMMIT_JOB.leased]) or 0) - 1)
  redis.call('HSET', K.job, 'leased', j[COMMIT_JOB.leased], 'done', j[COMMIT_JOB.done])
end
