--[[ credit_ident: a result of worker `wid` agreed with the verifier `by`'s: its identity's
  record (trust:<ident>) counts one more agreement, in a row and in all. Its results that
  stand unverified stay listed (unverified:<ident>): an agreement says nothing of them, and
  a later mismatch re-runs them all. TRUST_AFTER agreements in a row
  earn a new identity trust ('earned': sampled at VERIFY_FLOOR from then on; its latest
  worker's `trust` says so at once). Emits verified (and trusted).
]]
--- @include "common"
local function credit_ident(ctx, wid, by, tid, now)
  local ident = ident_of(wid)
  local key = ctx.prefix .. 'trust:' .. ident
  local streak = redis.call('HINCRBY', key, 'streak', 1)
  redis.call('HINCRBY', key, 'verified', 1)
  redis.call('HSET', key, 'last_verified_ms', int(now))
  emit(ctx, 'verified', 'job', job_of(tid), 'task', index_of(tid), 'worker', wid, 'by', by)
  if streak >= TRUST_AFTER and redis.call('HGET', key, 'level') == 'new' then
    redis.call('HSET', key, 'level', 'earned', 'trusted_ms', int(now))
    local latest = redis.call('HGET', ctx.prefix .. 'idents', ident)
    if latest and is_name(latest, 128)
        and redis.call('HGET', ctx.prefix .. 'worker:' .. latest, 'trust') == 'new' then
      redis.call('HSET', ctx.prefix .. 'worker:' .. latest, 'trust', 'earned')
    end
    emit(ctx, 'trusted', 'worker', latest or wid, 'ident', ident, 'agreements', streak)
  end
end
