--[[ hold_unverified: the commit of a worker that is not trusted (`trust`: its worker hash's
  field, 'new' or 'earned'): sampled (sample_verify), it is held for verification
  (hold_for_verify: the task verifies, the lease ends) while a live worker of the app may
  verify it (live_verifiers; the meta hash's noverify:<app> remembers that none was, until
  a verifier registers: a pool of gateway workers only does not wait); else its task joins
  the identity's results that stand unverified (list_unverified), which a mismatch
  re-runs. Returns true if the commit was held (nothing else of the commit is written
  then), else false.
]]
--- @include "sample_verify"
--- @include "hold_for_verify"
--- @include "live_verifiers"
--- @include "list_unverified"
local function hold_unverified(ctx, K, tid, j, c, trust, now)
  local ident, meta = ident_of(c.wid), c.prefix .. 'meta'
  local app = j[COMMIT_JOB.app] or ''
  if sample_verify(c.prefix, ident, trust, c.order or 1)
      and not redis.call('HGET', meta, 'noverify:' .. app) then
    if live_verifiers(c.prefix, c.prefix .. 'app:' .. app .. ':workers') then
      hold_for_verify(ctx, K, tid, j, c, now, 'cand', '')
      return true
    end
    redis.call('HSET', meta, 'noverify:' .. app, int(now)) -- until a verifier registers
  end
  list_unverified(c.prefix, c.wid, tid, int(now))
  return false
end
