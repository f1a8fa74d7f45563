--[[ recount_inflight: doctor's repair of inflight[app], the app's leased tasks (a task with
  a backup attempt counts once), counted over the lease set in one atomic call; refused
  (nil) when the lease set has more than MAX_VISIT members. fix = false only says what it
  would do. ctx fields used: prefix, leases, inflight. Returns what it did ('' if nothing).
]]
--- @include "common"
local function recount_inflight(ctx, app, fix)
  if redis.call('ZCARD', ctx.leases) > MAX_VISIT then
    return nil
  end
  local n = 0
  for _, tid in ipairs(redis.call('ZRANGE', ctx.leases, 0, -1)) do
    if is_task_id(tid) and redis.call('HGET', ctx.prefix .. 'task:' .. tid, 'state') == 'leased'
        and redis.call('HGET', ctx.prefix .. 'job:' .. job_of(tid), 'app') == app then
      n = n + 1
    end
  end
  local got = tonumber(redis.call('HGET', ctx.inflight, app)) or 0
  if got == n then
    return ''
  end
  if fix then
    redis.call('HSET', ctx.inflight, app, n)
  end
  return 'inflight ' .. int(got) .. ' -> ' .. n
end
