--[[ reject_stale: records a report the fence rejected (op: 'complete' or 'fail'; code: the
  fence's) as a stale_rejected event. t = the task's LEASE fields (fence). ctx fields
  used: events, maxlen.
]]
--- @include "common"
local function reject_stale(ctx, tid, wid, op, gen, t, code)
  emit(ctx, 'stale_rejected', 'job', job_of(tid), 'task', index_of(tid), 'worker', wid,
    'op', op, 'lease_gen', gen, 'current_gen', t[LEASE.lease_gen] or '', 'state',
    t[LEASE.state], 'code', code)
end
