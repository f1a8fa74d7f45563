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
  ARGV[3..14]  as complete-11's ARGV[3..14]: task id, lease_gen, attempt_id, result key,
           run time (s), warm ("1"/"0"), moving-average weight, events MAXLEN, provenance,
           quarantine after, quarantine cool-down (ms), inline result ("": in the store)
  ARGV[15..] the claim's arguments, as claim-12's ARGV[4..] (claim_argv): ARGV[15] app to
           claim for, ARGV[16] k (1..64), ARGV[17] lease TTL (ms), ARGV[18] gap (ms),
           ARGV[19] reap limit (0..256), ARGV[20] run-time limit floor (ms), ARGV[21] its
           factor, ARGV[22..] k to 64 fresh random attempt ids, one per task (a retry whose
           reply was lost sends the same ids and gets the same commit answer and the same
           leases back)

  Returns {commit_code, job_finished, claim_code, now_ms, payload[, reason]}
    commit_code, job_finished: as complete-11 (0 OK, 1 ALREADY)
    claim_code, now_ms, payload, reason: as claim-12 (0 OK, 2 WAIT, 3 EMPTY, 4 QUARANTINED,
    -10 WORKER_LOST)
  or {commit_code, 0} when the commit is rejected (complete-11's codes -1 .. -6): no claim.
  or {-9, message} (BAD_INPUT) when an argument is invalid: nothing was written
  (the claim's arguments and keys are checked before the commit).
]]
--- @include "common"
--- @include "commit_argv"
--- @include "claim_argv"
--- @include "check_claim_argv"
--- @include "complete_task"
--- @include "claim_tasks"

local commit = commit_argv(ARGV)
local claim = claim_argv(ARGV, 15, commit.prefix, commit.wid, commit.maxlen)
if #claim.attempt_ids > MAX_CLAIM_K then
  return bad_input('at most ' .. MAX_CLAIM_K .. ' attempt ids')
end
local bad = check_claim_argv(claim)
if bad then
  return bad_input(bad)
end
-- the two halves' keys by name: shared ones (worker, held, leases, ...) appear in both
local done = complete_task({
  task = KEYS[1], job = KEYS[2], worker = KEYS[3], held = KEYS[4], fleet = KEYS[5],
  leases = KEYS[6], alive = KEYS[7], inflight = KEYS[8], failed = KEYS[9], finished = KEYS[10],
  events = KEYS[11],
}, commit)
local code, finished = unpack(done)
if code < CODE.OK then
  return done
end
local claimed = claim_tasks({
  pending = KEYS[12], worker = KEYS[3], held = KEYS[4], fleet = KEYS[13], app_workers = KEYS[14],
  leases = KEYS[6], alive = KEYS[7], inflight = KEYS[8], failed = KEYS[9], finished = KEYS[10],
  meta = KEYS[15], events = KEYS[11],
}, claim)
return { code, finished, unpack(claimed) }
