--[[ free_sample: the commit of a task's primary attempt by a worker that is not vouched
  for, while a vouched verifier of another identity runs the task's backup attempt: that
  backup becomes the result's verification, a sample that costs no extra run (it runs
  anyway). The primary attempt ends (drop_attempt: the backup's fields become the task's
  lease, which stays in the lease set, held, in flight and counted in its job's leased
  tasks); the result is the task's candidate (write_candidate); the backup's worker holds
  one more verification and its run looks for the candidate before it commits
  (workers/outputs.py). b_worker: the backup's worker (the commit's COMMIT_TASK read).
  Emits verifying and verify_started (free 1). Returns true if the backup became the
  verification, else false (the commit settles the backup as usual).
]]
--- @include "drop_attempt"
--- @include "write_candidate"
local function free_sample(ctx, K, tid, c, b_worker, now)
  local key = is_name(b_worker, 128) and ctx.prefix .. 'worker:' .. b_worker
  if not key or ident_of(b_worker) == ident_of(c.wid) then
    return false
  end
  local verifier, trust, name, backend = unpack(redis.call('HMGET', key, 'verifier', 'trust',
    'name', 'backend'))
  if verifier ~= '1' or trust then
    return false
  end
  drop_attempt(ctx, tid, 'primary')
  write_candidate(ctx, K, tid, c, now, 'cand', '')
  redis.call('HINCRBY', K.job, 'verifying', 1)
  redis.call('HINCRBY', key, 'verifies', 1)
  emit(ctx, 'verifying', 'job', job_of(tid), 'task', index_of(tid), 'worker', c.wid,
    'lease_gen', c.gen, 'result', c.result_key, 'need', '')
  emit(ctx, 'verify_started', 'job', job_of(tid), 'task', index_of(tid), 'worker', b_worker,
    'name', name or '', 'backend', backend or '',
    'lease_gen', redis.call('HGET', K.task, 'lease_gen') or '0', 'of', c.wid, 'free', '1')
  return true
end
