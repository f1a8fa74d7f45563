--[[ note_failure: a failed attempt of worker wid at task tid of `app` (an error; a timeout
  has no app and q) counts against the worker: its failure streak (since its last commit)
  grows, with the task's id (streak_tids: the last MAX_STREAK ids, oldest first, kept for
  refunds) and, when an error came
  within q.fast_ms of the claim, its fast streak. The worker is quarantined
  (quarantine_worker) when its fast streak reaches q.fast_fails (0: never) and
  others_succeed. A quarantined worker's failures do not count (its attempts are not
  used), but a failed probe task sends it back for twice the cool-down. q: {fast_fails,
  fast_ms, cooldown_ms} or nil. ctx fields used: prefix, failed, finished, events, maxlen.
  Returns true if the worker is quarantined now.
]]
--- @include "others_succeed"
--- @include "quarantine_worker"
local function note_failure(ctx, wid, tid, app, now, claimed_ms, message, q)
  local worker_key = ctx.prefix .. 'worker:' .. wid
  local id, fail_streak, fast_streak, streak_since_ms, streak_tids, quarantined, probe_tid,
    cooldown_ms = unpack(redis.call('HMGET', worker_key, 'id', 'fail_streak', 'fast_streak',
    'streak_since_ms', 'streak_tids', 'quarantined', 'probe_tid', 'cooldown_ms'))
  if not id then
    return false -- the worker is gone
  end
  message = string.sub(message or '', 1, MAX_TEXT_BYTES)
  if quarantined == '1' then
    if probe_tid == tid then -- its probe failed
      quarantine_worker(ctx, wid, now, 'probe task failed: ' .. message,
        2 * (int_in(cooldown_ms, 1, MAX_COOLDOWN_MS) or 60000))
    end
    return true
  end
  local claimed = int_in(claimed_ms, 0, 1e15) or now
  local fast = q and now - claimed < q.fast_ms
  fast_streak = fast and (tonumber(fast_streak) or 0) + 1 or 0
  local since = tonumber(streak_since_ms) or claimed
  local ids = {}
  for x in string.gmatch(string.sub(streak_tids or '', 1, 81 * MAX_STREAK), '[^,]+') do
    ids[#ids + 1] = x
  end
  ids[#ids + 1] = tid
  local tids = table.concat(ids, ',', math.max(1, #ids - MAX_STREAK + 1))
  redis.call('HSET', worker_key, 'fail_streak', (tonumber(fail_streak) or 0) + 1,
    'fast_streak', fast_streak, 'streak_since_ms', int(since), 'streak_tids', tids,
    'last_error', message)
  if fast and q.fast_fails > 0 and fast_streak >= q.fast_fails
      and others_succeed(ctx.prefix, app, wid, since, tids) then
    quarantine_worker(ctx, wid, now, fast_streak .. ' tasks failed in a row within '
      .. int(q.fast_ms) .. ' ms, while other workers succeed; last: ' .. message, q.cooldown_ms)
    return true
  end
  return false
end
