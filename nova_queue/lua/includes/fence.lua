--[[ fence: checks a worker's report against the task's current lease.
  t = the task's {state, worker, lease_gen, attempt_id} (HMGET in that order).
  Returns 0 when the report holds the lease, else the stale code:
  -2 NOT_LEASED, -3 WRONG_WORKER, -4 LEASE_GEN_MISMATCH, -5 ATTEMPT_MISMATCH.
  A rejected report is recorded as a stale_rejected event (ctx: events, maxlen).
]]
local function fence(t, wid, gen, attempt_id)
  if t[1] ~= 'leased' then
    return -2
  elseif t[2] ~= wid then
    return -3
  elseif t[3] ~= gen then
    return -4
  elseif t[4] ~= attempt_id then
    return -5
  end
  return 0
end

local function reject_stale(ctx, tid, wid, op, gen, t, code)
  emit(ctx, 'stale_rejected', 'job', job_of(tid), 'task', index_of(tid), 'worker', wid,
    'op', op, 'lease_gen', gen, 'current_gen', t[3] or '', 'state', t[1], 'code', code)
end
