--[[ complete_claim_argv: complete_claim-15's ARGV (see its header) as the named fields of
  its two halves, read once: the commit (commit_argv's fields, from ARGV[1..13]) and the
  claim (claim_argv's fields; prefix, worker id and events MAXLEN are the commit's).
]]
--- @include "commit_argv"
--- @include "attempt_ids"
local function complete_claim_argv(A)
  local claim = {
    prefix = A[1], wid = A[2], app = A[14], k = int_in(A[15], 1, MAX_CLAIM_K),
    ttl_ms = int_in(A[16], 1, MAX_TTL_MS), gap_ms = int_in(A[17], 0, MAX_TTL_MS),
    maxlen = int_in(A[10], 1, MAX_EVENTS_MAXLEN) and A[10],
    reap_limit = int_in(A[18], 0, MAX_REAP), timeout_floor_ms = int_in(A[19], 1, MAX_TIMEOUT_MS),
    timeout_factor = num_in(A[20], 1, 1000), attempt_ids = attempt_ids(A, 21),
  }
  return commit_argv(A), claim
end
