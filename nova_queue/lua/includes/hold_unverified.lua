--[[ hold_unverified: the commit of a worker that is not trusted (`trust`: its worker hash's
  field, 'new' or 'earned'): sampled (sample_verify; every one while the worker is
  quarantined), it is held for verification
  (hold_for_verify: the task verifies, the lease ends) while a live worker of the app may
  verify it (live_verifiers, may_verify: not one of the maker's identity, nor of its owner
  unless vouched for; the meta hash's noverify:<app> remembers that no verifier was live,
  until one registers: a pool without verifiers does not wait); else its task joins
  the identity's results that stand unverified (list_unverified), which a mismatch
  re-runs. Returns true if the commit was held (nothing else of the commit is written
  then), else false.
]]
--- @include "sample_verify"
--- @include "hold_for_verify"
--- @include "live_verifiers"
--- @include "may_verify"
--- @include "list_unverified"
local function hold_unverified(ctx, K, tid, j, c, trust, now)
  local ident, meta = ident_of(c.wid), c.prefix .. 'meta'
  local app = j[COMMIT_JOB.app] or ''
  -- a quarantined worker's result is held every time: one caught lying commits the tasks
  -- it held when caught, and checks of its earlier results that agree may have raised its
  -- streak since; a result of it left unverified then would stand (no mismatch follows)
  if (redis.call('HGET', K.worker, 'quarantined') == '1'
        or sample_verify(c.prefix, ident, trust, c.order or 1))
      and not redis.call('HGET', meta, 'noverify:' .. app) then
    local vs = live_verifiers(c.prefix, c.prefix .. 'app:' .. app .. ':workers')
    local maker = { ident = ident, owner = redis.call('HGET', K.worker, 'owner') or ident }
    if may_verify(vs, { maker }) then
      hold_for_verify(ctx, K, tid, j, c, now, 'cand', '')
      return true
    end
    if vs and #vs == 0 then
      redis.call('HSET', meta, 'noverify:' .. app, int(now)) -- until a verifier registers
    end
  end
  list_unverified(c.prefix, c.wid, tid, int(now))
  return false
end
