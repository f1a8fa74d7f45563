--[[ claim_argv: claim-12's ARGV (see its header) as named fields, read once. Numbers come
  out as numbers, or nil when out of range (check_claim_argv refuses those); maxlen stays
  the string sent (XADD gets it as is) once it is in range.
]]
--- @include "attempt_ids"
local function claim_argv(A)
  return {
    prefix = A[1], wid = A[2], app = A[3], k = int_in(A[4], 1, MAX_CLAIM_K),
    ttl_ms = int_in(A[5], 1, MAX_TTL_MS), gap_ms = int_in(A[6], 0, MAX_TTL_MS),
    maxlen = int_in(A[7], 1, MAX_EVENTS_MAXLEN) and A[7],
    reap_limit = int_in(A[8], 0, MAX_REAP), timeout_floor_ms = int_in(A[9], 1, MAX_TIMEOUT_MS),
    timeout_factor = num_in(A[10], 1, 1000), attempt_ids = attempt_ids(A, 11),
  }
end
