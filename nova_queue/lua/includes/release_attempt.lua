--[[ release_attempt: worker wid's attempt at task tid ends without a result: when the task
  has a second attempt running only wid's ends (end_attempt) and 'leased' is returned;
  else the task is released (release: requeued, failed or cancelled) and its new state
  returned (nil if it was not leased).
]]
--- @include "end_attempt"
--- @include "release"
local function release_attempt(ctx, tid, wid, now, kind, message, burn)
  local t = redis.call('HMGET', ctx.prefix .. 'task:' .. tid, 'state', 'worker', 'b_worker')
  if t[1] == 'leased' and t[3] and (t[3] == wid or t[2] == wid) then
    end_attempt(ctx, tid, t[3] == wid and 'backup' or 'primary', kind, message)
    return 'leased'
  end
  return release(ctx, tid, now, kind, message, burn)
end
