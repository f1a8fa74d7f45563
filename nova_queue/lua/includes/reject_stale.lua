--[[ reject_stale: records a report the fence rejected (op: 'complete' or 'fail'; code: the
  fence's) as a stale_rejected event. t = the task's {state, worker, lease_gen}. ctx fields
  used: events, maxlen.
]]
--- @include "common"
local function reject_stale(ctx, tid, wid, op, gen, t, code)
  emit(ctx, 'stale_rejected', 'job', job_of(tid), 'task', index_of(tid), 'worker', wid,
    'op', op, 'lease_gen', gen, 'current_gen', t[3] or '', 'state', t[1], 'code', code)
end
