--[[ record_run: a committed run in the worker's hash, one read and one write: its task
  counts and when it last committed; its speed for the app (a warm run updates the moving
  average of seconds per cost unit, weight alpha, and the worker's fleet score while it is
  alive and not quarantined; a cold run, the first after a load, is kept apart as
  compile/warm-up time); a failure streak ends; holding nothing more, idle. A quarantined
  worker whose probe task this was is let back (lift_quarantine).
  K: worker, held, fleet keys; cost: the task's cost field. ctx fields used: alive, plus
  lift_quarantine's.
]]
--- @include "lift_quarantine"
local function record_run(ctx, K, wid, tid, app, cost, run_s, warm, alpha, now)
  local w = redis.call('HMGET', K.worker, 'id', 'tasks_done', 'done:' .. app, 'ema:' .. app,
    'n:' .. app, 'fail_streak', 'quarantined', 'probe_tid')
  if not w[1] then
    return
  end
  local update = { 'tasks_done', (tonumber(w[2]) or 0) + 1, 'done:' .. app,
    (tonumber(w[3]) or 0) + 1, 'last_done_ms', int(now) }
  if warm then
    local sample = math.min(math.max(run_s / (num_in(cost, MIN_COST, MAX_COST) or 1), MIN_SPEED),
      MAX_SPEED)
    local ema = num_in(w[4], MIN_SPEED, MAX_SPEED)
    local n = tonumber(w[5]) or 0
    if n > 0 and ema then
      ema = alpha * sample + (1 - alpha) * ema
    else
      ema = sample
    end
    update[#update + 1], update[#update + 2] = 'ema:' .. app, num(ema)
    update[#update + 1], update[#update + 2] = 'n:' .. app, n + 1
    if w[7] ~= '1' and redis.call('ZSCORE', ctx.alive, wid) then
      redis.call('ZADD', K.fleet, num(ema), wid)
    end
  else
    update[#update + 1], update[#update + 2] = 'cold:' .. app, num(run_s)
  end
  if (tonumber(w[6]) or 0) > 0 then -- a failure streak ends with a commit
    for _, f in ipairs({ 'fail_streak', 0, 'fast_streak', 0, 'blamed', 0, 'streak_tids', '',
        'streak_since_ms', '' }) do
      update[#update + 1] = f
    end
  end
  if redis.call('SCARD', K.held) == 0 then
    update[#update + 1], update[#update + 2] = 'state', 'idle'
    update[#update + 1], update[#update + 2] = 'busy_until_ms', int(now)
  end
  redis.call('HSET', K.worker, unpack(update))
  if w[7] == '1' and w[8] == tid then
    lift_quarantine(ctx, wid, now, 'probe')
  end
end
