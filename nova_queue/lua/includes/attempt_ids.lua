--[[ attempt_ids: the attempt ids a call sent from ARGV[first] on, as a list of at most
  MAX_CLAIM_K + 1 (one past the cap, so that check_claim_argv can refuse too many without
  this copying all of them).
]]
--- @include "common"
local function attempt_ids(A, first)
  local ids = {}
  for i = first, math.min(#A, first + MAX_CLAIM_K) do
    ids[#ids + 1] = A[i]
  end
  return ids
end
