--[[ complete_claim_argv: complete_claim-15's ARGV (see its header) as the named fields of
  its two halves, read once: the commit (commit_argv's fields, from ARGV[1..11]) and the
  claim (claim_argv's fields; prefix, worker id and events MAXLEN are the commit's).
]]
--- @include "commit_argv"
--- @include "attempt_ids"
local function complete_claim_argv(A)
  local claim = {
    prefix = A[1], wid = A[2], app = A[12], k = int_in(A[13], 1, MAX_CLAIM_K),
    ttl_ms = int_in(A[14], 1, MAX_TTL_MS), gap_ms = int_in(A[15], 0, MAX_TTL_MS),
    maxlen = int_in(A[10], 1, MAX_EVENTS_MAXLEN) and A[10],
    reap_limit = int_in(A[16], 0, MAX_REAP), attempt_ids = attempt_ids(A, 17),
  }
  return commit_argv(A), claim
end
