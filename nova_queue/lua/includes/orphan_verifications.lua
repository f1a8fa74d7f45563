--[[ orphan_verifications: results of the app awaiting verification for VERIFY_ORPHAN_MS
  (the first 4 in verify:<app>) when no live worker may verify them (live_verifiers,
  may_verify: none of another identity and, unless vouched for, another owner): one
  that needs a trusted opinion fails (two results that are not trusted disagreed, and no
  trusted worker is live to decide); any other stands unverified (stand_unverified: its
  maker is caught if a later result of it is). Those that a live verifier may take move to
  the back of the queue, looked at again VERIFY_ORPHAN_MS later. Run by every claim of the
  app that gets nothing of its own (claim_idle): a pool whose verifiers left still finishes
  its jobs.
]]
--- @include "live_verifiers"
--- @include "may_verify"
--- @include "stand_unverified"
local function orphan_verifications(ctx, K, app, now)
  local key = ctx.prefix .. 'verify:' .. app
  local due = redis.call('ZRANGEBYSCORE', key, '-inf', int(now - VERIFY_ORPHAN_MS), 'LIMIT', 0, 4)
  if #due == 0 then
    return
  end
  local vs = live_verifiers(ctx.prefix, K.app_workers)
  for _, tid in ipairs(due) do
    local task_key = is_task_id(tid) and ctx.prefix .. 'task:' .. tid
    local state, v_need, cand_wid, cand_owner, cand2_wid, cand2_owner = unpack(task_key
      and redis.call('HMGET', task_key, 'state', 'v_need', 'cand_wid', 'cand_owner',
        'cand2_wid', 'cand2_owner') or {})
    local makers = {}
    for _, m in ipairs({ { cand_wid, cand_owner }, { cand2_wid, cand2_owner } }) do
      if m[1] then
        makers[#makers + 1] = { ident = ident_of(m[1]), owner = m[2] or ident_of(m[1]) }
      end
    end
    local any, trusted = may_verify(vs, makers)
    if state ~= 'verifying' then
      redis.call('ZREM', key, tid)
    elseif v_need == 'trusted' and not trusted then
      stand_unverified(ctx, tid, now, 'failed')
    elseif v_need ~= 'trusted' and not any then
      if vs and #vs == 0 then
        redis.call('HSET', ctx.prefix .. 'meta', 'noverify:' .. app, int(now))
      end
      stand_unverified(ctx, tid, now, 'done')
    else
      redis.call('ZADD', key, 'XX', int(now), tid)
    end
  end
end
