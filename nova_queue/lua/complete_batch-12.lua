--[[ complete_batch: commits up to 64 results of one worker and, optionally, claims its next
  tasks in the same call: one round trip and one set of counter writes for a whole run of
  small tasks. Each commit is fenced exactly as complete-11 fences one (worker, lease_gen,
  attempt id; a replay of a commit that took effect answers ALREADY), and each is answered
  on its own: a stale one is rejected (stale_rejected) without touching the others. Every
  commit still emits its own completed event; the leases and held sets, the in-flight and
  job counts, the worker's run record and the owners' usage are written once per batch (a
  commit with a backup attempt, with earlier failures to blame, or of a cancelled job is
  committed by complete-11's own code, the batch's counts written first). The claim is
  claim-12's; it runs whatever the commits answered (a stale commit says nothing about the
  worker: the claim checks that it is registered).

  KEYS[1]  worker hash        nova:{ns}:worker:<wid>
  KEYS[2]  held set           nova:{ns}:held:<wid>
  KEYS[3]  leases zset        nova:{ns}:leases
  KEYS[4]  alive zset         nova:{ns}:alive
  KEYS[5]  inflight hash      nova:{ns}:inflight
  KEYS[6]  failed zset        nova:{ns}:failed
  KEYS[7]  finished zset      nova:{ns}:finished
  KEYS[8]  events stream      nova:{ns}:events
  KEYS[9]  pending zset       nova:{ns}:pending:<claim app>
  KEYS[10] fleet zset         nova:{ns}:app:<claim app>:fleet
  KEYS[11] app workers set    nova:{ns}:app:<claim app>:workers
  KEYS[12] meta hash          nova:{ns}:meta
  (the committed tasks' and jobs' hashes and their apps' fleets are built from the prefix)

  ARGV[1]  key prefix ("nova:{ns}:")
  ARGV[2]  worker id
  ARGV[3]  moving-average weight (0 < alpha <= 1), ARGV[4] events MAXLEN (1..10^9),
  ARGV[5]  quarantine after (1..1000), ARGV[6] quarantine cool-down (ms): as complete-11's
           ARGV[9], ARGV[10], ARGV[12], ARGV[13]
  ARGV[7]  n: commits in this call (1..64)
  ARGV[8..7+8n]  per commit: task id, lease_gen, attempt id, result key, run time (s), warm
           ("1"/"0"), provenance, inline result ("": in the store): as complete-11's
           ARGV[3..8], ARGV[11] and ARGV[14]
  then, optional (from c = 8+8n): the claim's arguments, as claim-12's ARGV[4..]
  (claim_argv): ARGV[c] app to claim for ("" or absent: no claim), ARGV[c+1] k (1..64),
  ARGV[c+2] lease TTL (ms), ARGV[c+3] gap (ms), ARGV[c+4] reap limit, ARGV[c+5] run-time
  limit floor (ms), ARGV[c+6] its factor, ARGV[c+7..] k to 64 attempt ids (a retry whose
  reply was lost sends the same ids and gets the same commit answers and the same leases
  back)

  Checks: every commit's identity and report (check_commit_ids, check_commit_report: the
  result key names its lease, numbers in range) and the claim's arguments, before anything
  is read or written.

  Returns {codes, finished}, and with a claim {codes, finished, claim_code, now_ms, payload,
  reason (when claim-12 gives one)}
    codes: per commit, complete-11's code (0 OK, 1 ALREADY, -1 .. -6)
    finished: per commit, 1 if it finished its job
    claim_code, now_ms, payload, reason: as claim-12 (only when a claim was asked for)
  or {-9, message} (BAD_INPUT) when an argument is invalid: nothing was written.
]]
--- @include "common"
--- @include "batch_argv"
--- @include "check_claim_argv"
--- @include "check_batch"
--- @include "commit_batch"
--- @include "claim_tasks"

local commits, claim = batch_argv(ARGV)
if not commits then
  return bad_input('1 to ' .. MAX_CLAIM_K .. ' commits of 7 arguments each')
end
local bad = check_batch(commits) or (claim and check_claim_argv(claim))
if bad then
  return bad_input(bad)
end
local K = {
  worker = KEYS[1], held = KEYS[2], leases = KEYS[3], alive = KEYS[4], inflight = KEYS[5],
  failed = KEYS[6], finished = KEYS[7], events = KEYS[8], pending = KEYS[9], fleet = KEYS[10],
  app_workers = KEYS[11], meta = KEYS[12],
}
local codes, finished = commit_batch(K, commits)
if not claim then
  return { codes, finished }
end
return { codes, finished, unpack(claim_tasks(K, claim)) }
