--[[ release_attempt: worker wid's attempt at task tid ends without a result. When the task
  has a second attempt running, only wid's ends: the other runs on as the task's only
  attempt (drop_attempt), the task stays leased and its counts do not change; attempt_ended
  is emitted and 'leased' returned. Else the task is released (release: requeued, failed or
  cancelled) and its new state returned (nil if it was not leased). ctx: as release's.
]]
--- @include "drop_attempt"
--- @include "release"
local function release_attempt(ctx, tid, wid, now, kind, message, burn)
  local state, worker, b_worker = unpack(redis.call('HMGET', ctx.prefix .. 'task:' .. tid,
    'state', 'worker', 'b_worker'))
  if state == 'leased' and b_worker and (b_worker == wid or worker == wid) then
    local ended = drop_attempt(ctx, tid, b_worker == wid and 'backup' or 'primary')
    emit(ctx, 'attempt_ended', 'job', job_of(tid), 'task', index_of(tid), 'worker',
      ended[ATTEMPT.worker] or '', 'lease_gen', ended[ATTEMPT.lease_gen] or '0', 'kind', kind,
      'error', message)
    return 'leased'
  end
  return release(ctx, tid, now, kind, message, burn)
end
