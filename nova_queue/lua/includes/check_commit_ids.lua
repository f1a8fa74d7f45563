--[[ check_commit_ids: what is wrong with a commit's identity (checked before the fence),
  or nil: sizes, KEYS (K.task, K.job), events MAXLEN, quarantine policy. c: commit_argv's
  fields. The worker id, lease_gen and attempt id need no pattern here: the fence compares
  them with what claim wrote (and checked), and a stale report only records them in an
  event.
]]
--- @include "common"
local function check_commit_ids(K, c)
  local tid = c.tid
  local job_id = c.provenance and #tid <= 80 and job_of(tid)
  if not job_id or #c.wid > 128 or #c.gen > 20 or #c.attempt_id > 64 or not c.maxlen
      or not c.quarantine_after or not c.cooldown_ms then
    return 'invalid worker id, task id, lease_gen, attempt id, events MAXLEN or quarantine '
      .. 'policy'
  end
  if K.task ~= c.prefix .. 'task:' .. tid or K.job ~= c.prefix .. 'job:' .. job_id then
    return "KEYS[1] and KEYS[2] are not the reported task's and its job's"
  end
  return nil
end
