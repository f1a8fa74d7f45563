--[[ check_batch: what is wrong with any commit of a batch (batch_argv's commits), or nil:
  the fields every commit shares (worker id, events MAXLEN, quarantine policy) once, then
  per commit a task id of the task-id pattern (its keys are built from it, so they are its
  own: no KEYS to compare), the sizes check_commit_ids allows and check_commit_report, all
  before anything is read or written: a batch is refused whole
  (the report's checks come before the fence here, unlike complete-11's: a stale commit with
  a malformed report is refused as BAD_INPUT, not as stale).
]]
--- @include "check_commit_report"
local function check_batch(commits)
  local first = commits[1]
  if #first.wid > 128 or not first.maxlen or not first.quarantine_after
      or not first.cooldown_ms then
    return 'invalid worker id, task id, lease_gen, attempt id, events MAXLEN or quarantine '
      .. 'policy'
  end
  for _, c in ipairs(commits) do
    local tid = c.tid
    local job_id, index
    if #tid <= 80 then
      job_id, index = string.match(tid, '^([A-Za-z0-9_%-]+):(%d+)$')
    end
    if not job_id then
      return 'invalid task id'
    end
    if #c.gen > 20 or #c.attempt_id > 64 or not c.provenance then
      return 'invalid worker id, task id, lease_gen, attempt id, events MAXLEN or quarantine '
        .. 'policy'
    end
    local bad = check_commit_report(c, job_id, index)
    if bad then
      return bad
    end
  end
  return nil
end
