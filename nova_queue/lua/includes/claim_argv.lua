--[[ claim_argv: a claim's arguments, the one layout every claiming command sends
  (claim-12's ARGV[4..], complete_claim-15's ARGV[14..], complete_batch-12's after its
  commits), read once into named fields from A[at] on, in the order
  nova_queue/claim_args.py's ClaimArgs writes them (tests/core/test_lua_argv.py checks):
    app, k (1..64), lease TTL (ms), gap (ms), reap limit (0..256), run-time limit floor (ms)
    and factor (1..1000), then k to 64 attempt ids
  (the attempt ids copied up to one past the cap, so check_claim_argv can refuse too many
  without this copying all of them). prefix, wid and maxlen (the events MAXLEN, in range or
  nil) are the command's own. Numbers come out as numbers, or nil when out of range
  (check_claim_argv refuses those).
]]
--- @include "common"
local function claim_argv(A, at, prefix, wid, maxlen)
  local ids = {}
  for i = at + 7, math.min(#A, at + 7 + MAX_CLAIM_K) do
    ids[#ids + 1] = A[i]
  end
  return {
    prefix = prefix, wid = wid, maxlen = maxlen, app = A[at],
    k = int_in(A[at + 1], 1, MAX_CLAIM_K), ttl_ms = int_in(A[at + 2], 1, MAX_TTL_MS),
    gap_ms = int_in(A[at + 3], 0, MAX_TTL_MS), reap_limit = int_in(A[at + 4], 0, MAX_REAP),
    timeout_floor_ms = int_in(A[at + 5], 1, MAX_TIMEOUT_MS),
    timeout_factor = num_in(A[at + 6], 1, 1000), attempt_ids = ids,
  }
end
