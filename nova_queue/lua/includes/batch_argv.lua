--[[ batch_argv: complete_batch-12's ARGV (see its header) as named fields, read once: its
  commits, each with commit_argv's fields (the shared policy fields in each, so that
  check_commit_ids, check_commit_report and complete_task take a commit as it is), and the
  claim after them (claim_argv's fields), or nil when no app is named. Returns nil when the
  count of commits is out of range or ARGV is shorter than that count says.
]]
--- @include "attempt_ids"
local function batch_argv(A)
  local n = int_in(A[7], 1, MAX_CLAIM_K)
  if not n or #A < 7 + 7 * n then
    return nil
  end
  local maxlen = int_in(A[4], 1, MAX_EVENTS_MAXLEN) and A[4]
  local alpha, after = num_in(A[3], 0, 1), int_in(A[5], 1, MAX_ATTEMPTS)
  local cooldown = int_in(A[6], 1, MAX_COOLDOWN_MS)
  local commits = {}
  for i = 0, n - 1 do
    local b = 8 + 7 * i
    commits[i + 1] = {
      prefix = A[1], wid = A[2], tid = A[b], gen = A[b + 1], attempt_id = A[b + 2],
      result_key = A[b + 3], run_s = num_in(A[b + 4], 0, MAX_RUN_S), warm = A[b + 5],
      provenance = A[b + 6], alpha = alpha, maxlen = maxlen, quarantine_after = after,
      cooldown_ms = cooldown,
    }
  end
  local c = 8 + 7 * n
  if not A[c] or A[c] == '' then
    return commits, nil
  end
  return commits, {
    prefix = A[1], wid = A[2], app = A[c], k = int_in(A[c + 1], 1, MAX_CLAIM_K),
    ttl_ms = int_in(A[c + 2], 1, MAX_TTL_MS), gap_ms = int_in(A[c + 3], 0, MAX_TTL_MS),
    maxlen = maxlen, reap_limit = int_in(A[c + 4], 0, MAX_REAP),
    timeout_floor_ms = int_in(A[c + 5], 1, MAX_TIMEOUT_MS),
    timeout_factor = num_in(A[c + 6], 1, 1000), attempt_ids = attempt_ids(A, c + 7),
  }
end
