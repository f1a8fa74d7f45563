--[[ batch_argv: complete_batch-12's ARGV (see its header) as named fields, read once: its
  commits, each with commit_argv's fields (the shared policy fields in each, so that
  check_commit_ids, check_commit_report and complete_task take a commit as it is), and the
  claim after them (claim_argv's fields: its one layout), or nil when no app is named.
  Returns nil when the count of commits is out of range or ARGV is shorter than that count
  says.
]]
--- @include "claim_argv"
local function batch_argv(A)
  local n = int_in(A[7], 1, MAX_CLAIM_K)
  if not n or #A < 7 + 8 * n then
    return nil
  end
  local prefix, wid = A[1], A[2]
  local maxlen = int_in(A[4], 1, MAX_EVENTS_MAXLEN) and A[4]
  local alpha, after = num_in(A[3], 0, 1), int_in(A[5], 1, MAX_ATTEMPTS)
  local cooldown = int_in(A[6], 1, MAX_COOLDOWN_MS)
  local commits = {}
  for i = 0, n - 1 do
    local b = 8 + 8 * i
    commits[i + 1] = {
      prefix = prefix, wid = wid, tid = A[b], gen = A[b + 1], attempt_id = A[b + 2],
      result_key = A[b + 3], run_s = num_in(A[b + 4], 0, MAX_RUN_S), warm = A[b + 5],
      provenance = A[b + 6], inline = A[b + 7], alpha = alpha, maxlen = maxlen,
      quarantine_after = after, cooldown_ms = cooldown,
    }
  end
  local at = 8 + 8 * n
  if not A[at] or A[at] == '' then
    return commits, nil
  end
  return commits, claim_argv(A, at, prefix, wid, maxlen)
end
