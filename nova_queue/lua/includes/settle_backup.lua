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
  local loser_id = loser[ATTEMPT.worker]
  local task_key = ctx.prefix .. 'task:' .. tid
  local worker, lease_gen = unpack(redis.call('HMGET', task_key, 'worker', 'lease_gen'))
  if winner == 'backup' then
    redis.call('HSET', task_key, 'won_by_backup', 1) -- the gallery's card says so
  end
  local elapsed_s = (now - (int_in(loser[ATTEMPT.claimed_ms], 0, 1e15) or now)) / 1000
  local key = is_name(loser_id, 128) and (ctx.prefix .. 'worker:' .. loser_id)
  local loser_ema, loser_n = unpack(key and redis.call('HMGET', key, 'ema:' .. app, 'n:' .. app)
    or {})
  local ema = num_in(loser_ema, MIN_SPEED, MAX_SPEED)
  local shown = math.min(elapsed_s / (num_in(cost, MIN_COST, MAX_COST) or 1), MAX_SPEED)
  if ema and (tonumber(loser_n) or 0) > 0 and shown > ema then
    redis.call('HSET', key, 'ema:' .. app, num(shown))
    redis.call('ZADD', ctx.prefix .. 'app:' .. app .. ':fleet', 'XX', num(shown), loser_id)
  end
  emit(ctx, winner == 'backup' and 'backup_won' or 'backup_lost', 'job', job_of(tid),
    'task', index_of(tid), 'worker', worker or '', 'lease_gen', lease_gen or '0',
    'loser', loser_id or '', 'loser_gen', loser[ATTEMPT.lease_gen] or '0',
    'loser_run_s', num(elapsed_s))
end
