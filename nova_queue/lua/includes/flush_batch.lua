--[[ flush_batch: writes what commit_fast gathered in b, once per batch (and before a commit
  that complete_task makes, so that it reads the counts afresh): the completed events (one
  entry: emit_completed, before the runs' events, as single commits order them), the
  committed tasks leave
  the lease set and the worker's held set, each app's in-flight count drops by its commits,
  each job's done and leased counts are written once (commit_fast wrote those of a job it
  finished), each app's runs are recorded
  (record_runs) and each owner's usage settled (note_usage). Then b is empty again.
]]
--- @include "common"
--- @include "record_runs"
--- @include "note_usage"
--- @include "emit_completed"
local function flush_batch(ctx, K, b, now)
  emit_completed(ctx, b.ev, ctx.wid)
  if #b.tids > 0 then
    redis.call('ZREM', K.leases, unpack(b.tids))
    redis.call('SREM', K.held, unpack(b.tids))
  end
  for _, app in ipairs(b.apps) do
    redis.call('HINCRBY', ctx.inflight, app, -#b.runs[app])
  end
  for _, job_id in ipairs(b.order) do
    if b.last[job_id] then -- else commit_fast finished the job and wrote its counts
      local j = b.jobs[job_id]
      redis.call('HSET', ctx.prefix .. 'job:' .. job_id, 'leased', j[COMMIT_JOB.leased], 'done',
        j[COMMIT_JOB.done])
    end
  end
  for _, app in ipairs(b.apps) do
    record_runs(ctx, K, app, b.runs[app], now)
  end
  for owner, run_s in pairs(b.usage) do
    note_usage(ctx.prefix, owner, run_s, now)
  end
  b.tids, b.jobs, b.order, b.last, b.runs, b.apps, b.usage = {}, {}, {}, {}, {}, {}, {}
end
