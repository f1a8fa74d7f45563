--[[ complete_claim: commits a task's result and, if the commit holds, claims the worker's
  next tasks in the same call: one round trip per task instead of two. Exactly complete-11
  followed by claim-12 (same fencing, policy, reaping and events); a rejected commit
  claims nothing.

  KEYS[1]  task hash          nova:{ns}:task:<job>:<index>
  KEYS[2]  job hash           nova:{ns}:job:<job>
  KEYS[3]  worker hash        nova:{ns}:worker:<wid>
  KEYS[4]  held set           nova:{ns}:held:<wid>
  KEYS[5]  fleet zset         nova:{ns}:app:<app>:fleet           (the committed task's app)
  KEYS[6]  leases zset        nova:{ns}:leases
  KEYS[7]  alive zset         nova:{ns}:alive
  KEYS[8]  inflight hash      nova:{ns}:inflight
  KEYS[9]  failed zset        nova:{ns}:failed
  KEYS[10] finished zset      nova:{ns}:finished
  KEYS[11] events stream      nova:{ns}:events
  KEYS[12] pending zset       nova:{ns}:pending:<claim app>
  KEYS[13] fleet zset         nova:{ns}:app:<claim app>:fleet
  KEYS[14] app workers set    nova:{ns}:app:<claim app>:workers
  KEYS[15] meta hash          nova:{ns}:meta

  ARGV[1]  key prefix ("nova:{ns}:")
  ARGV[2]  worker id
  ARGV[3..11]  as complete-11's ARGV[3..11]: task id, lease_gen, attempt_id, result key,
           run time (s), warm ("1"/"0"), moving-average weight, events MAXLEN, provenance
  ARGV[12] app to claim for
  ARGV[13] k: most tasks to lease (1..64)
  ARGV[14] lease TTL (ms, 1..86400000)
  ARGV[15] gap (ms, 0..86400000) after which a silent Redis opens a grace window
  ARGV[16] reap limit per call (0..256)
  ARGV[17..] k to 64 fresh random attempt ids, one per task (a retry whose reply was lost
           sends the same ids and gets the same commit answer and the same leases back)

  Returns {commit_code, job_finished, claim_code, now_ms, payload}
    commit_code, job_finished: as complete-11 (0 OK, 1 ALREADY)
    claim_code, now_ms, payload: as claim-12 (0 OK, 2 WAIT, 3 EMPTY, -10 WORKER_LOST)
  or {commit_code, 0} when the commit is rejected (complete-11's codes -1 .. -6): no claim.
  or {-9, message} (BAD_INPUT) when an argument is invalid: nothing was written
  (the claim's arguments and keys are checked before the commit).
]]
--- @include "common"
--- @include "clock"
--- @include "fence"
--- @include "release"
--- @include "complete"
--- @include "claim"

local claim_argv = { ARGV[1], ARGV[2], ARGV[12], ARGV[13], ARGV[14], ARGV[15], ARGV[10], ARGV[16] }
if #ARGV - 16 > MAX_CLAIM_K then
  return bad_input('at most ' .. MAX_CLAIM_K .. ' attempt ids')
end
for i = 17, #ARGV do
  claim_argv[#claim_argv + 1] = ARGV[i]
end
local bad = check_claim_args(claim_argv)
if bad then
  return bad_input(bad)
end
local done = complete_task({
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6],
  KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11],
}, { ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9], ARGV[10],
  ARGV[11] })
if done[1] < 0 then
  return done
end
local claimed = claim_tasks({
  KEYS[12], KEYS[3], KEYS[4], KEYS[13], KEYS[14], KEYS[6],
  KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[15], KEYS[11],
}, claim_argv)
return { done[1], done[2], claimed[1], claimed[2], claimed[3] }
