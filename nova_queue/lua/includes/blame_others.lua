--[[ blame_others: task tid, just committed by worker wid, had failed on the identities of
  `failed_on`: the latest worker of each other one (`idents`) whose current failure streak
  holds the task failed a task that succeeds elsewhere, and is quarantined
  (quarantine_worker, its last error as the reason) once that happened c.quarantine_after
  times in its streak. Weighs the first MAX_LISTED ids. c: commit_argv's fields. ctx: as quarantine_worker's. Returns true if it
  quarantined a worker.
]]
--- @include "in_list"
--- @include "quarantine_worker"
local function blame_others(ctx, tid, failed_on, wid, now, c)
  local n, quarantined, ident = 0, false, ident_of(wid)
  for id in string.gmatch(string.sub(failed_on, 1, MAX_OOM_BYTES), '[^,]+') do
    n = n + 1
    if n > MAX_LISTED then
      break
    end
    local u = id ~= ident and (redis.call('HGET', ctx.prefix .. 'idents', id) or id)
    local key = u and is_name(u, 128) and (ctx.prefix .. 'worker:' .. u)
    local streak_tids, blamed, quarantined_now, last_error = unpack(key and redis.call('HMGET',
      key, 'streak_tids', 'blamed', 'quarantined', 'last_error') or {})
    if key and quarantined_now ~= '1' and in_list(streak_tids, tid) then
      blamed = (tonumber(blamed) or 0) + 1
      redis.call('HSET', key, 'blamed', blamed)
      if blamed >= c.quarantine_after then
        quarantine_worker(ctx, u, now, blamed .. ' failed tasks succeeded on other workers; last: '
          .. (last_error or ''), c.cooldown_ms)
        quarantined = true
      end
    end
  end
  return quarantined
end
