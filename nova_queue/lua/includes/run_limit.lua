--[[ run_limit: an attempt's run-time limit (ms) for the m-th task of its job in one claim
  (a batch runs them together): the job's `timeout_s` per task (m times it) when set, else
  max(the caller's floor, its factor x `finish_s`, the predicted finish of that task, when
  there is a prediction); at most MAX_TIMEOUT_MS. a: claim_argv's fields.
]]
--- @include "common"
local function run_limit(a, job_timeout_s, m, finish_s)
  local timeout = num_in(job_timeout_s, 0.001, MAX_TIMEOUT_MS / 1000)
  local limit = a.timeout_floor_ms
  if timeout then
    limit = timeout * 1000 * m
  elseif finish_s then
    limit = math.max(limit, a.timeout_factor * finish_s * 1000)
  end
  return math.floor(math.min(limit, MAX_TIMEOUT_MS))
end
