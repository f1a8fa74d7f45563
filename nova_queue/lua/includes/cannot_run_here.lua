--[[ cannot_run_here: what a claiming worker's `cannot_run` field (raw: read by claim_tasks'
  one HMGET, so a worker without marks costs nothing more) says about `app`: {model ->
  reason} of its live marks (job_eligible refuses those jobs, find_backup their tasks), or
  nil when it has none. A field whose marks all expired is deleted.
]]
--- @include "live_marks"
local function cannot_run_here(worker_key, raw, app, now)
  local list, of_app = live_marks(raw, now, app)
  if #list == 0 then
    redis.call('HDEL', worker_key, 'cannot_run')
  end
  return next(of_app) and of_app or nil
end
