--[[ claim_idle: the answer to a claim that found nothing of its own to take: a backup
  attempt of a running task of the app (find_backup, write_backup) when the worker has
  measured runs of the app (a declared speed earns no backups) and an estimate t_w
  (estimated here when nil) and is not probing; else WAIT with `hint` (the policy's or
  BLOCKED), WAIT DRAINING when nothing is pending but tasks are in flight, or EMPTY. Each
  answer notes when the worker last claimed (claim_ms: others' claims count on it a while).
  Results awaiting verification that no live worker may verify are settled first
  (orphan_verifications: idle claims look, the busy path does not pay for it).
]]
--- @include "estimate"
--- @include "find_backup"
--- @include "write_backup"
--- @include "orphan_verifications"
local function claim_idle(ctx, K, a, me, probing, now, hint, t_w)
  orphan_verifications(ctx, K, a.app, now)
  local inflight = tonumber(redis.call('HGET', K.inflight, a.app) or '0') or 0
  if inflight > 0 and not probing and (tonumber(me.n) or 0) > 0 then
    t_w = t_w or estimate(K.fleet, a.prefix, a.wid, a.app, me)
    local b = t_w and find_backup(ctx, a, t_w, now, me.marks)
    if b then
      return { CODE.OK, int(now), cjson.encode({ write_backup(ctx, K, a, me, b, t_w, now) }) }
    end
  end
  redis.call('HSET', K.worker, 'claim_ms', int(now))
  if hint then
    return { CODE.WAIT, int(now), hint }
  end
  if inflight > 0 then
    return { CODE.WAIT, int(now), WAIT_MS.DRAINING }
  end
  return { CODE.EMPTY, int(now), WAIT_MS.EMPTY }
end
