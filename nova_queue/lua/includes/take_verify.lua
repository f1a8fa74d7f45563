--[[ take_verify: a result awaiting verification (verify:<app>, oldest first, the first
  MAX_VERIFY_SCAN) that the claiming worker may verify: a task still `verifying`, whose
  candidates none of this worker's identity made; a worker the operator does not vouch for
  (me.trust 'new' or 'earned') takes only one that needs no trusted opinion, has waited
  VERIFY_WAIT_MS for a trusted one, and whose candidates no worker of its owner made (the
  hash's `owner`, a gateway token's, else the identity: one person's machines never vouch
  for each other); not one of a model it could not prepare (me.marks). Members that are no
  longer verifying, or whose job is gone, leave the set; a task of a cancelled job is
  cancelled. Returns its
  lease (write_verify_lease), or nil.
]]
--- @include "write_verify_lease"
local function take_verify(ctx, K, a, me, now)
  local key = ctx.prefix .. 'verify:' .. a.app
  local mine = ident_of(a.wid)
  local own = me.trust and (redis.call('HGET', K.worker, 'owner') or mine)
  for _, tid in ipairs(redis.call('ZRANGE', key, 0, MAX_VERIFY_SCAN - 1)) do
    local task_key = is_task_id(tid) and ctx.prefix .. 'task:' .. tid
    local t = task_key and redis.call('HMGET', task_key, unpack(VERIFY_TASK))
    if not t or t[VERIFY_TASK.state] ~= 'verifying' then
      redis.call('ZREM', key, tid)
    elseif ident_of(t[VERIFY_TASK.cand_wid] or '') ~= mine
        and ident_of(t[VERIFY_TASK.cand2_wid] or '') ~= mine
        and (not me.trust or (t[VERIFY_TASK.v_need] ~= 'trusted'
          and now - (int_in(t[VERIFY_TASK.v_since_ms], 0, 1e15) or 0) >= VERIFY_WAIT_MS
          and (t[VERIFY_TASK.cand_owner] or ident_of(t[VERIFY_TASK.cand_wid] or '')) ~= own
          and (t[VERIFY_TASK.cand2_owner] or ident_of(t[VERIFY_TASK.cand2_wid] or '')) ~= own))
        then
      local job_key = ctx.prefix .. 'job:' .. job_of(tid)
      local j = redis.call('HMGET', job_key, unpack(VERIFY_JOB))
      if not j[VERIFY_JOB.state] then
        redis.call('ZREM', key, tid) -- its job is gone (purged): nothing to write
      elseif j[VERIFY_JOB.state] == 'cancelled' then
        redis.call('ZREM', key, tid)
        redis.call('HSET', task_key, 'state', 'cancelled')
        redis.call('HINCRBY', job_key, 'verifying', -1)
        redis.call('HINCRBY', job_key, 'cancelled', 1)
        finish_job_if_done(ctx, job_key, job_of(tid), now)
      elseif not (me.marks and me.marks[j[VERIFY_JOB.model] or '']) then
        return write_verify_lease(ctx, K, a, me, tid, t, j, now)
      end
    end
  end
  return nil
end
