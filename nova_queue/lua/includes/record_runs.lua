--[[ record_runs: the committed runs of one app (runs: {tid, cost, run_s, warm} in commit
  order: a batch's, or complete_task's one), one read and one write of the worker hash for
  all of them: its task counts and last commit time, its moving average over the warm runs
  in order (weight alpha; and its fleet score while alive and not quarantined), the last
  cold run's time (the first after a load, kept apart as compile/warm-up time), the end of a
  failure streak, idle once it holds nothing; a quarantined worker whose probe task is
  among them is let back (lift_quarantine); a priced worker's runs are charged to their jobs
  (`cost`: price x run time). ctx fields used: prefix, wid, alpha, alive,
  plus lift_quarantine's.
]]
--- @include "lift_quarantine"
local function record_runs(ctx, K, app, runs, now)
  local id, tasks_done, done, ema, n, fail_streak, quarantined, probe_tid, price = unpack(
    redis.call('HMGET', K.worker, 'id', 'tasks_done', 'done:' .. app, 'ema:' .. app, 'n:' .. app,
    'fail_streak', 'quarantined', 'probe_tid', 'price'))
  if not id then
    return
  end
  price = num_in(price, 0, MAX_PRICE) or 0
  if price > 0 then -- what its runs cost their jobs (nova_queue/terms.py), once per job
    local seconds = {}
    for _, r in ipairs(runs) do
      local job_id = job_of(r.tid)
      seconds[job_id] = (seconds[job_id] or 0) + math.min(math.max(r.run_s, 0), MAX_RUN_S)
    end
    for job_id, s in pairs(seconds) do
      local job_key = ctx.prefix .. 'job:' .. job_id -- no HINCRBYFLOAT in the worker's ACL
      local cost = num_in(redis.call('HGET', job_key, 'cost'), 0, 1e15) or 0
      redis.call('HSET', job_key, 'cost', num(cost + price * s / 3600))
    end
  end
  local update = { 'tasks_done', (tonumber(tasks_done) or 0) + #runs, 'done:' .. app,
    (tonumber(done) or 0) + #runs, 'last_done_ms', int(now) }
  ema, n = num_in(ema, MIN_SPEED, MAX_SPEED), tonumber(n) or 0
  local n0, cold, probe = n, nil, false
  for _, r in ipairs(runs) do
    if r.warm then
      local sample = math.min(math.max(r.run_s / (num_in(r.cost, MIN_COST, MAX_COST) or 1),
        MIN_SPEED), MAX_SPEED)
      ema = (n > 0 and ema) and (ctx.alpha * sample + (1 - ctx.alpha) * ema) or sample
      n = n + 1
    else
      cold = r.run_s
    end
    probe = probe or r.tid == probe_tid
  end
  if n > n0 then
    update[#update + 1], update[#update + 2] = 'ema:' .. app, num(ema)
    update[#update + 1], update[#update + 2] = 'n:' .. app, n
    if quarantined ~= '1' and redis.call('ZSCORE', ctx.alive, ctx.wid) then
      redis.call('ZADD', ctx.prefix .. 'app:' .. app .. ':fleet', num(ema), ctx.wid)
    end
  end
  if cold then
    update[#update + 1], update[#update + 2] = 'cold:' .. app, num(cold)
  end
  if (tonumber(fail_streak) or 0) > 0 then -- a failure streak ends with a commit
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
  if quarantined == '1' and probe then
    lift_quarantine(ctx, ctx.wid, now, 'probe')
  end
end
