--[[ write_verify_lease: leases task tid, awaiting verification (take_verify: t its
  VERIFY_TASK read, j its job's VERIFY_JOB read), to the claiming worker: a lease as a
  claim writes one (a lease_gen above every earlier one, the first attempt id, lease and
  run deadlines; the task leased, in the lease set and the held set, counted in flight
  and in its job's leased tasks), its attempt count unchanged: the verifier's run is the
  pool's, not a retry, and it gets no backup attempt (`backups` 1). The worker hash counts
  the verifications it holds (`verifies`: while it holds one, its commits look for
  candidates: complete_task, commit_batch). Emits verify_started. Returns the lease (claim-12's
  reply fields, verify = the candidates' result keys).
]]
--- @include "run_limit"
local function write_verify_lease(ctx, K, a, me, tid, t, j, now)
  local job_id, index = job_of(tid), index_of(tid)
  local gen = math.max(int_in(t[VERIFY_TASK.lease_gen], 0, 1e15) or 0,
    int_in(t[VERIFY_TASK.gen_top], 0, 1e15) or 0) + 1
  local cost = num_in(t[VERIFY_TASK.cost], MIN_COST, MAX_COST) or 1
  local speed = num_in(me.ema, MIN_SPEED, MAX_SPEED) or num_in(me.bench, MIN_SPEED, MAX_SPEED)
  local predicted = speed and speed * cost or nil
  local run_deadline = now + run_limit(a, j[VERIFY_JOB.timeout_s], 1, predicted)
  local deadline, attempt_id = math.min(now + a.ttl_ms, run_deadline), a.attempt_ids[1]
  redis.call('HSET', ctx.prefix .. 'task:' .. tid, 'state', 'leased', 'lease_gen', gen,
    'gen_top', gen, 'worker', a.wid, 'worker_name', me.name, 'backend', me.backend,
    'host', me.host, 'attempt_id', attempt_id, 'claimed_ms', int(now),
    'deadline_ms', int(deadline), 'run_deadline_ms', int(run_deadline),
    'predicted_s', predicted and num(predicted) or '', 'charged', '0', 'backups', 1)
  redis.call('ZREM', ctx.prefix .. 'verify:' .. a.app, tid)
  redis.call('ZADD', ctx.leases, int(deadline), tid)
  redis.call('SADD', K.held, tid)
  redis.call('HINCRBY', ctx.inflight, a.app, 1)
  redis.call('HINCRBY', ctx.prefix .. 'job:' .. job_id, 'leased', 1)
  redis.call('HINCRBY', K.worker, 'verifies', 1)
  redis.call('HSET', K.worker, 'state', 'busy', 'busy_until_ms', int(now + (predicted or 0) * 1000),
    'last_claim', attempt_id, 'claim_ms', int(now), 'claims', (tonumber(me.claims) or 0) + 1)
  emit(ctx, 'verify_started', 'job', job_id, 'task', index, 'worker', a.wid, 'name', me.name,
    'backend', me.backend, 'lease_gen', gen, 'of', t[VERIFY_TASK.cand2_wid]
    or t[VERIFY_TASK.cand_wid] or '', 'free', '0')
  return {
    tid = tid, job = job_id, index = tonumber(index), input = t[VERIFY_TASK.input], cost = cost,
    params = j[VERIFY_JOB.params] or '{}', lease_gen = gen, attempt_id = attempt_id,
    attempt = tonumber(t[VERIFY_TASK.attempt_count]) or 1, deadline_ms = int(deadline),
    predicted_s = predicted or cjson.null, run_deadline_ms = int(run_deadline),
    verify = { cand = t[VERIFY_TASK.cand] or cjson.null, cand2 = t[VERIFY_TASK.cand2] or cjson.null },
  }
end
