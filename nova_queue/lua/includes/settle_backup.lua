--[[ settle_backup: the commit of a task with a backup attempt: the first commit wins and
  the other attempt is stale from now on (drop_attempt: it leaves its worker's held set, so
  its renew reports the task lost and its commit is rejected). `winner`: 'primary' or
  'backup'. The loser has run its whole elapsed time without finishing: its moving average
  for the app rises to at least elapsed / cost (a throttled worker stops looking fast).
  Emits backup_won (the backup committed first) or backup_lost. ctx: prefix, leases,
  events, maxlen.
]]
--- @include "drop_attempt"
local function settle_backup(ctx, tid, winner, app, cost, now)
  local loser = drop_attempt(ctx, tid, winner == 'primary' and 'backup' or 'primary')
  local task_key = ctx.prefix .. 'task:' .. tid
  local w = redis.call('HMGET', task_key, 'worker', 'lease_gen')
  if winner == 'backup' then
    redis.call('HSET', task_key, 'won_by_backup', 1) -- the gallery's card says so
  end
  local elapsed_s = (now - (int_in(loser[7], 0, 1e15) or now)) / 1000
  local key = is_name(loser[1], 128) and (ctx.prefix .. 'worker:' .. loser[1])
  local h = key and redis.call('HMGET', key, 'ema:' .. app, 'n:' .. app)
  local ema = h and num_in(h[1], MIN_SPEED, MAX_SPEED)
  local shown = math.min(elapsed_s / (num_in(cost, MIN_COST, MAX_COST) or 1), MAX_SPEED)
  if ema and (tonumber(h[2]) or 0) > 0 and shown > ema then
    redis.call('HSET', key, 'ema:' .. app, num(shown))
    redis.call('ZADD', ctx.prefix .. 'app:' .. app .. ':fleet', 'XX', num(shown), loser[1])
  end
  emit(ctx, winner == 'backup' and 'backup_won' or 'backup_lost', 'job', job_of(tid),
    'task', index_of(tid), 'worker', w[1] or '', 'lease_gen', w[2] or '0',
    'loser', loser[1] or '', 'loser_gen', loser[5] or '0', 'loser_run_s', num(elapsed_s))
end
