--[[ claim_tasks: the body of claim-12 as a function, so that complete_claim-15 can run it
  after a commit. K: claim-12's KEYS by name (pending, worker, held, fleet, app_workers, leases,
  alive, inflight, failed, finished, meta, events); a: its ARGV by name (claim_argv),
  checked by check_claim_argv. Returns claim-12's reply. Each step is an include: reap,
  claim_again (a retried claim), quarantine_gate (a quarantined worker probes with one
  task), scan_candidates, estimate, grant_count (the policy; terms_grant when the head
  candidate's job has a deadline or a budget), write_leases; claim_idle
  when the worker gets nothing of its own (a backup attempt, or when to ask again). The
  worker's cannot_run marks (cannot_run_here, read only when it has the field) keep it
  from jobs of the models it could not prepare. A worker that verifies (its field
  `verifier`) is offered a result awaiting verification first (take_verify).
]]
--- @include "tick"
--- @include "reap"
--- @include "claim_again"
--- @include "quarantine_gate"
--- @include "scan_candidates"
--- @include "grant_count"
--- @include "terms_grant"
--- @include "write_leases"
--- @include "claim_idle"
--- @include "claimer"
--- @include "take_verify"
local function claim_tasks(K, a)
  local ctx = {
    prefix = a.prefix, leases = K.leases, alive = K.alive, inflight = K.inflight,
    failed = K.failed, finished = K.finished, meta = K.meta, events = K.events,
    maxlen = a.maxlen, budget = MAX_RELEASES,
  }
  local now = now_ms()
  reap(ctx, now, tick(ctx, now, a.gap_ms, a.ttl_ms), a.reap_limit)
  if not redis.call('ZSCORE', K.alive, a.wid) then
    return { CODE.WORKER_LOST, int(now), 'worker ' .. a.wid .. ' is not registered' }
  end
  local me, last_claim, quarantined, verifier = claimer(K, a, now)
  if last_claim == a.attempt_ids[1] then
    local again = claim_again(a.prefix, K.held, a.attempt_ids)
    if again then
      return { CODE.OK, int(now), again }
    end
  end
  local probing = quarantined == '1'
  if probing then
    local refused = quarantine_gate(ctx, K, a, now)
    if refused then
      return refused
    end
    a.k = 1 -- a probe: one task
  end
  local verify = verifier == '1' and not probing and take_verify(ctx, K, a, me, now)
  if verify then
    return { CODE.OK, int(now), cjson.encode({ verify }) }
  end
  local R = redis.call('ZCARD', K.pending)
  if R == 0 then
    return claim_idle(ctx, K, a, me, probing, now)
  end
  local s = scan_candidates(ctx, K, a, me, now)
  if #s.tids == 0 then
    return claim_idle(ctx, K, a, me, probing, now, WAIT_MS.BLOCKED)
  end
  if s.removed > 0 then
    R = redis.call('ZCARD', K.pending)
  end
  local t_w, measured = estimate(K.fleet, a.prefix, a.wid, a.app, me)
  local j = s.jobs[s.job]
  local grant, hint
  if (j[CLAIM_JOB.deadline_ms] or '') ~= '' or (j[CLAIM_JOB.budget] or '') ~= '' then
    grant, hint = terms_grant(ctx, K, a, t_w, measured, s, R, now, me)
  else
    grant, hint = grant_count(K.fleet, a.prefix, a.wid, t_w, measured, s, R, now, me)
  end
  if grant == 0 then
    return claim_idle(ctx, K, a, me, probing, now, hint, t_w)
  end
  local leases = write_leases(ctx, K, a, me, s, grant, t_w, now)
  if probing then
    redis.call('HSET', K.worker, 'probe_tid', leases[1].tid)
  end
  return { CODE.OK, int(now), cjson.encode(leases) }
end
