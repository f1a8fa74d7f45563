--[[ check_batch: what is wrong with any commit of a batch (batch_argv's commits), or nil:
  a task id of the task-id pattern (its keys are built from it), then check_commit_ids and
  check_commit_report, all before anything is read or written: a batch is refused whole
  (the report's checks come before the fence here, unlike complete-11's: a stale commit with
  a malformed report is refused as BAD_INPUT, not as stale).
]]
--- @include "check_commit_ids"
--- @include "check_commit_report"
local function check_batch(commits)
  for _, c in ipairs(commits) do
    if not is_task_id(c.tid) then
      return 'invalid task id'
    end
    local job_id = job_of(c.tid)
    local bad = check_commit_ids({ task = c.prefix .. 'task:' .. c.tid,
      job = c.prefix .. 'job:' .. job_id }, c) or check_commit_report(c, job_id, index_of(c.tid))
    if bad then
      return bad
    end
  end
  return nil
end
