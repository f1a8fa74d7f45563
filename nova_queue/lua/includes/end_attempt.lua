--[[ end_attempt: one of a task's two running attempts ends without a result (it failed, its
  lease expired or ran out of time, its worker left or was lost); the other runs on as the
  task's only attempt (drop_attempt). The task stays leased and its counts do not change.
  Emits attempt_ended. ctx fields used: prefix, leases, events, maxlen. Returns the worker
  id whose attempt ended.
]]
--- @include "drop_attempt"
local function end_attempt(ctx, tid, which, kind, message)
  local ended = drop_attempt(ctx, tid, which)
  emit(ctx, 'attempt_ended', 'job', job_of(tid), 'task', index_of(tid), 'worker', ended[1] or '',
    'lease_gen', ended[5] or '0', 'kind', kind, 'error', message)
  return ended[1]
end
