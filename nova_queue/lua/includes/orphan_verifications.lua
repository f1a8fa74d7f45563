--[[ orphan_verifications: results of the app awaiting verification for VERIFY_ORPHAN_MS
  (the first 4 in verify:<app>) when no live worker may verify them (live_verifiers): one
  that needs a trusted opinion fails (two results that are not trusted disagreed, and no
  trusted worker is live to decide); any other stands unverified (stand_unverified: its
  maker is caught if a later result of it is). Those that a live verifier may take move to
  the back of the queue, looked at again VERIFY_ORPHAN_MS later. Run by every claim of the
  app that gets nothing of its own (claim_idle): a pool whose verifiers left still finishes
  its jobs.
]]
--- @include "live_verifiers"
--- @include "stand_unverified"
local function orphan_verifications(ctx, K, app, now)
  local key = ctx.prefix .. 'verify:' .. app
  local due = redis.call('ZRANGEBYSCORE', key, '-inf', int(now - VERIFY_ORPHAN_MS), 'LIMIT', 0, 4)
  if #due == 0 then
    return
  end
  local any, trusted = live_verifiers(ctx.prefix, K.app_workers)
  for _, tid in ipairs(due) do
    local task_key = is_task_id(tid) and ctx.prefix .. 'task:' .. tid
    local state, v_need = unpack(task_key and redis.call('HMGET', task_key, 'state', 'v_need')
      or {})
    if state ~= 'verifying' then
      redis.call('ZREM', key, tid)
    elseif v_need == 'trusted' and not trusted then
      stand_unverified(ctx, tid, now, 'failed')
    elseif v_need ~= 'trusted' and not any then
      redis.call('HSET', ctx.prefix .. 'meta', 'noverify:' .. app, int(now))
      stand_unverified(ctx, tid, now, 'done')
    else
      redis.call('ZADD', key, 'XX', int(now), tid)
    end
  end
end
