--[[ left_to_others: whether the claiming worker leaves a task to others: it ran out of memory
  on the task (`oom`, worker ids) or its identity failed on it (`failed_on`, identities:
  ident_of), and some live worker of the app is on neither list (quarantined workers have
  left the app's worker set). With few live workers (MAX_LISTED at most) each is looked at,
  and only one that still claims counts (still_claiming: a worker that never claims holds no
  task); with more, the live workers of the listed ids are counted (a listed identity's live
  worker is its latest id, `idents`). With no such worker the task may run here again, so a task
  that fails everywhere still ends failed, and so may one listed with more than MAX_LISTED
  entries. s.live caches the app's live worker count for one scan.
]]
--- @include "in_list"
--- @include "still_claiming"
local function left_to_others(s, prefix, app_workers_key, a, oom, failed_on, now)
  local wid = a.wid
  if not in_list(oom, wid) and not in_list(failed_on, ident_of(wid)) then
    return false
  end
  local ids, listed = {}, 0
  for i, list in ipairs({ oom or '', failed_on or '' }) do
    for id in string.gmatch(list, '[^,]+') do
      listed = listed + 1
      if listed > MAX_LISTED then
        return false -- listed that often: the task's fault, not this worker's
      end
      ids[listed] = i == 1 and id or redis.call('HGET', prefix .. 'idents', id) or id
    end
  end
  s.live = s.live or redis.call('SCARD', app_workers_key)
  if s.live <= MAX_LISTED then
    local since = now - math.max(a.ttl_ms, MIN_CLAIMING_MS)
    for _, v in ipairs(redis.call('SMEMBERS', app_workers_key)) do
      if not in_list(oom, v) and not in_list(failed_on, ident_of(v)) then
        local claim_ms, busy_until_ms = unpack(redis.call('HMGET', prefix .. 'worker:' .. v,
          'claim_ms', 'busy_until_ms'))
        if still_claiming(prefix, v, claim_ms, busy_until_ms, since) then
          return true
        end
      end
    end
    return false
  end
  local seen, live_listed = {}, 0
  for _, v in ipairs(ids) do
    if not seen[v] then
      seen[v] = true
      live_listed = live_listed + redis.call('SISMEMBER', app_workers_key, v)
    end
  end
  return live_listed < s.live
end
