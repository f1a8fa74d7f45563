--[[ write_leases: leases the first `grant` candidates of the scan s to the claiming worker
  (me: its name, backend, host and claims count), one attempt id each, with a predicted
  run time when it has an estimate t_w (and its measured load time first, for a job whose
  model it does not hold warm: it holds it from now on, set_warm) and a run deadline
  (run_limit) past which renew no longer extends the lease; under fair share the predicted
  time is charged to the job's owner at once (note_usage, once per owner; the commit settles
  the rest); then the pending, lease and held sets (one call each for all the leases), the
  jobs' counts, the app's in-flight count and the worker's state. The claimed events are one
  entry of the stream for all the leases (emit_claimed: claimed_many for two or more).
  Returns the leases (claim-12's reply fields).
]]
--- @include "update_job_counts"
--- @include "run_limit"
--- @include "set_warm"
--- @include "note_usage"
--- @include "emit_claimed"
local function write_leases(ctx, K, a, me, s, grant, t_w, now)
  local leases, granted, order = {}, {}, {} -- leases per job, written to its counts once
  local charges, busy = {}, 0 -- owner -> seconds charged; the predicted seconds of all
  local tids, scored = {}, {} -- the pending, lease and held sets change once, for all of them
  local ev, now_s = { job = {}, task = {}, gen = {}, attempt = {}, predicted = {} }, int(now)
  for i = 1, grant do
    local tid, t, cost = s.tids[i], s.tasks[i], s.costs[i]
    local job_id, index = job_of(tid), index_of(tid)
    local gen_s = int(math.max(int_in(t[CLAIM_TASK.lease_gen], 0, 1e15) or 0, -- strings:
      int_in(t[CLAIM_TASK.gen_top], 0, 1e15) or 0) + 1) -- Redis formats numbers slowly
    local attempt_s = int((int_in(t[CLAIM_TASK.attempt_count], 0, 1e15) or 0) + 1)
    local attempt_id, predicted = a.attempt_ids[i], t_w and (t_w * cost) or nil
    local predicted_s = predicted and num(predicted) or ''
    busy = busy + (predicted or 0)
    granted[job_id] = (granted[job_id] or 0) + 1
    if granted[job_id] == 1 then
      order[#order + 1] = job_id
    end
    local j = s.jobs[job_id]
    local model = j[CLAIM_JOB.model]
    if model and model ~= '' and model ~= me.warm then -- it loads the model first
      busy = busy + me.load_s
      set_warm(ctx.prefix, a.app, K.worker, me.warm, model)
      me.warm = model
    end
    local run_deadline = now + run_limit(a, j[CLAIM_JOB.timeout_s], granted[job_id], t_w and busy)
    local deadline_s, run_deadline_s = int(math.min(now + a.ttl_ms, run_deadline)),
      int(run_deadline)
    local charged = s.fair and predicted or 0 -- fair share counts work in flight at once
    local owner = j[CLAIM_JOB.owner] or ''
    charges[owner] = charged > 0 and (charges[owner] or 0) + charged or charges[owner]
    redis.call('HSET', ctx.prefix .. 'task:' .. tid, 'state', 'leased', 'lease_gen', gen_s,
      'attempt_count', attempt_s, 'worker', a.wid, 'worker_name', me.name, 'backend', me.backend,
      'host', me.host, 'attempt_id', attempt_id, 'deadline_ms', deadline_s,
      'claimed_ms', now_s, 'predicted_s', predicted_s, 'run_deadline_ms', run_deadline_s,
      'charged', charged > 0 and predicted_s or '0')
    scored[2 * i - 1], scored[2 * i], tids[i] = deadline_s, tid, tid
    leases[i] = { -- numbers as the strings written above (the client parses either)
      tid = tid, job = job_id, index = index, input = t[CLAIM_TASK.input], cost = cost,
      params = j[CLAIM_JOB.params] or '{}', lease_gen = gen_s, attempt_id = attempt_id,
      attempt = attempt_s, deadline_ms = deadline_s, predicted_s = predicted and predicted_s
      or cjson.null, run_deadline_ms = run_deadline_s,
    }
    ev.job[i], ev.task[i], ev.gen[i], ev.attempt[i], ev.predicted[i] = job_id, index, gen_s,
      attempt_s, predicted_s
  end
  emit_claimed(ctx, ev, a.wid, me)
  redis.call('ZREM', K.pending, unpack(tids))
  redis.call('ZADD', K.leases, unpack(scored))
  redis.call('SADD', K.held, unpack(tids))
  for owner, charged in pairs(charges) do -- one entry per owner of the granted tasks
    note_usage(ctx.prefix, owner, charged, now, s.usage)
  end
  update_job_counts(ctx.prefix, s.jobs, granted, order, now)
  redis.call('HINCRBY', ctx.inflight, a.app, int(grant))
  redis.call('HSET', K.worker, 'state', 'busy', 'busy_until_ms', int(now + busy * 1000),
    'last_claim', a.attempt_ids[1], 'claim_ms', now_s,
    'claims', int((tonumber(me.claims) or 0) + grant))
  return leases
end
