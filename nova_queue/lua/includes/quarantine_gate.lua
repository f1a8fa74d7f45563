--[[ quarantine_gate: what the claim of a quarantined worker gets (its quarantine_until_ms,
  probe_tid, quarantine_reason and cooldown_ms are read here: only a quarantined one has them).
  Before its cool-down ends, or while its probe task runs: QUARANTINED, with when to ask
  again and the reason. A probe that ended without a commit (a commit lifts the
  quarantine) failed: quarantined again for twice the cool-down. After the cool-down: nil,
  and the claim goes on as a probe of one task (claim_tasks marks it).
]]
--- @include "quarantine_worker"
local function quarantine_gate(ctx, K, a, now)
  local quarantine_until_ms, probe_tid, quarantine_reason, cooldown_ms = unpack(redis.call(
    'HMGET', K.worker, 'quarantine_until_ms', 'probe_tid', 'quarantine_reason', 'cooldown_ms'))
  local until_ms, reason = tonumber(quarantine_until_ms) or 0, quarantine_reason or ''
  if probe_tid then
    local state, worker, b_worker = unpack(redis.call('HMGET', ctx.prefix .. 'task:' .. probe_tid,
      'state', 'worker', 'b_worker'))
    if state == 'leased' and (worker == a.wid or b_worker == a.wid) then
      return { CODE.QUARANTINED, int(now), WAIT_MS.QUARANTINE_MAX, 'probe task running; ' .. reason }
    end
    if string.sub(reason, 1, 10) ~= 'probe task' then
      reason = 'probe task did not commit; before: ' .. reason
    end
    local cooldown = 2 * (int_in(cooldown_ms, 1, MAX_COOLDOWN_MS) or 60000)
    quarantine_worker(ctx, a.wid, now, reason, cooldown)
    until_ms = now + math.min(cooldown, MAX_COOLDOWN_MS)
  end
  if now < until_ms then
    return { CODE.QUARANTINED, int(now), int(math.min(until_ms - now, WAIT_MS.QUARANTINE_MAX)),
      reason }
  end
  return nil
end
