--[[ catch_ident: a result of worker `wid` did not agree with the trusted verifier `by`'s
  (task tid). Its identity loses trust (its record: level new, no agreements in a row, one
  more mismatch, why), its latest worker is quarantined (quarantine_worker, reason naming
  the mismatch) and every result the identity committed unverified (unverified:<ident>, its
  latest MAX_UNVERIFIED) is re-run (reopen_task): a job's final results keep none of them. Emits mismatch. Returns the number of results re-run.
]]
--- @include "quarantine_worker"
--- @include "reopen_task"
local function catch_ident(ctx, wid, by, tid, now, cooldown_ms)
  local ident = ident_of(wid)
  local key, list = ctx.prefix .. 'trust:' .. ident, ctx.prefix .. 'unverified:' .. ident
  local reason = 'its result of task ' .. tid .. ' did not match that of ' .. by
  redis.call('HSET', key, 'level', 'new', 'streak', 0, 'last_mismatch_ms', int(now),
    'mismatch_reason', reason)
  redis.call('HINCRBY', key, 'mismatches', 1)
  local latest = redis.call('HGET', ctx.prefix .. 'idents', ident) or wid
  local worker_key = ctx.prefix .. 'worker:' .. latest
  if is_name(latest, 128) and redis.call('EXISTS', worker_key) == 1 then
    if redis.call('HGET', worker_key, 'trust') == 'earned' then
      redis.call('HSET', worker_key, 'trust', 'new')
    end
    quarantine_worker(ctx, latest, now, reason, cooldown_ms)
  end
  local reopened, listed = 0, redis.call('ZRANGE', list, 0, MAX_UNVERIFIED - 1)
  for _, u in ipairs(listed) do
    reopened = reopened + reopen_task(ctx, u, ident, now)
  end
  for i = 1, #listed, 256 do -- ZREM, not DEL: the worker role has no DEL (docs/SECURITY.md)
    redis.call('ZREM', list, unpack(listed, i, math.min(i + 255, #listed)))
  end
  emit(ctx, 'mismatch', 'job', job_of(tid), 'task', index_of(tid), 'worker', wid, 'by', by,
    'reopened', reopened)
  return reopened
end
