--[[ commit_argv: complete-11's ARGV (see its header), also complete_claim-15's ARGV[1..14],
  as named fields, read once. Ids stay the strings sent (the fence compares them with what
  claim wrote); run_s, alpha and the quarantine policy (how many failures that succeed
  elsewhere quarantine a worker, and for how long) come out as numbers, or nil when out of
  range, and maxlen as the string sent once it is in range (check_commit_ids and
  check_commit_report refuse the nils).
]]
--- @include "common"
local function commit_argv(A)
  return {
    prefix = A[1], wid = A[2], tid = A[3], gen = A[4], attempt_id = A[5], result_key = A[6],
    run_s = num_in(A[7], 0, MAX_RUN_S), warm = A[8], alpha = num_in(A[9], 0, 1),
    maxlen = int_in(A[10], 1, MAX_EVENTS_MAXLEN) and A[10], provenance = A[11],
    quarantine_after = int_in(A[12], 1, MAX_ATTEMPTS),
    cooldown_ms = int_in(A[13], 1, MAX_COOLDOWN_MS), inline = A[14],
  }
end
