--[[ hold_for_verify: a commit sampled for verification (sample_verify) does not make its
  task done: the task is `verifying`, its result kept as the candidate `slot` ('cand', or
  'cand2' for a second opinion that disagreed: `need` 'trusted' then), with who made it
  (worker id, name, backend, host, owner: its hash's `owner`, a gateway token's, else its
  identity), its run time, when (ms), its provenance and its
  lease (lease_gen, attempt id: its result key's); a result
  sent inline waits in field `slot` of inline:<task>. The lease ends (lease set, held set,
  in-flight count, the job's leased count) and the task joins verify:<app> for another
  worker to run again (take_verify). The job counts one more verifying task (a first hold).
  Emits verifying. c: commit_argv's fields; j: the job's COMMIT_JOB read.
]]
--- @include "common"
local function hold_for_verify(ctx, K, tid, j, c, now, slot, need)
  local name, backend, host, owner = unpack(redis.call('HMGET', K.worker, 'name', 'backend',
    'host', 'owner'))
  local app = j[COMMIT_JOB.app] or ''
  redis.call('HSET', K.task, 'state', 'verifying', slot, c.result_key, slot .. '_wid', c.wid,
    slot .. '_name', name or '', slot .. '_backend', backend or '', slot .. '_host', host or '',
    slot .. '_owner', owner or ident_of(c.wid),
    slot .. '_run_s', num(c.run_s), slot .. '_ms', int(now), slot .. '_meta', c.provenance,
    slot .. '_gen', c.gen, slot .. '_attempt', c.attempt_id, 'v_since_ms', int(now),
    'v_need', need)
  if c.inline ~= '' then
    redis.call('HSET', ctx.prefix .. 'inline:' .. tid, slot, c.inline)
  end
  redis.call('ZREM', K.leases, tid)
  redis.call('SREM', K.held, tid)
  redis.call('HINCRBY', ctx.inflight, app, -1)
  j[COMMIT_JOB.leased] = int((tonumber(j[COMMIT_JOB.leased]) or 0) - 1)
  redis.call('HSET', K.job, 'leased', j[COMMIT_JOB.leased])
  if slot == 'cand' then
    redis.call('HINCRBY', K.job, 'verifying', 1)
  end
  redis.call('ZADD', ctx.prefix .. 'verify:' .. app, now, tid)
  emit(ctx, 'verifying', 'job', job_of(tid), 'task', index_of(tid), 'worker', c.wid,
    'lease_gen', c.gen, 'result', c.result_key, 'need', need)
end
