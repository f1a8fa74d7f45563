--[[ claim: leases up to k pending tasks of one app to a worker, weighing predicted
  completion time, after lazily reaping lost workers and expired leases.

  Policy. R tasks are pending; every other live worker v of the app has an estimate t_v
  (seconds per cost unit) and a predicted free time b_v (never before now). Worker w
  (estimate t_w) gets its m-th task, of cumulative cost C_m, only if the others could
  not finish all the remaining work before w would finish it:
      sum_v n_v < R - m + 1,   n_v = ceil(x_v) - 1 for x_v = (now + t_w*C_m - b_v) / (t_v*c) > 0
  (c = head task's cost). n_v counts the tasks v finishes strictly before w would, so
  equally fast idle workers never wait on each other: the fastest idle worker always
  gets work (floor(x_v) would deadlock a fleet of identical workers at the tail).
  Fast path, O(log n): the left side is at most N * t_w * C_m / (t_min * c) (N, t_min:
  size and best estimate of the fleet), so while R is large no worker is visited.
  A worker without samples uses its startup benchmark, scaled by the fleet's median
  ratio of measured to benchmarked speed; a worker with no estimate at all explores
  (one task). Tasks a worker ran out of memory on, or failed on, go to others while
  others that may take them live (left_to_others); a worker whose last attempt failed is
  not counted on by others' claims.

  Deadlines and budgets (terms_grant): when the head candidate's job has a deadline, only
  its candidates are weighed, by the least-cost plan instead: worker w (price p_w per hour)
  gets its m-th task while it finishes it by the deadline D and the workers cheaper per task
  (p_v * t_v < p_w * t_w) finish fewer than R_job - m + 1 tasks by D (floor((D - b_v) /
  (t_v*c)) each; 5 % of the time left kept in hand); when even the whole pool cannot, as
  above. A budget caps the job's predicted spend (price x predicted time) on priced workers.

  Run-time limit: each lease gets a run deadline, the job's timeout_s per task when set,
  else max(floor, factor x the predicted finish); renew never extends a lease past it.

  Backups: a worker that gets nothing of its own (nothing pending, or the policy says
  wait) may get a backup attempt of a running task of the app that it would finish clearly
  sooner (find_backup: at least 1 s and half the running attempt's rest sooner; an overdue
  attempt's rest counts as long again as it has run); both run and the first commit wins.
  At most one backup per task.

  Quarantine: a quarantined worker gets QUARANTINED until its cool-down ends, then one
  probe task; its commit lets the worker back (quarantine_gate, record_runs).

  KEYS[1]  pending zset        nova:{ns}:pending:<app>
  KEYS[2]  worker hash         nova:{ns}:worker:<wid>
  KEYS[3]  held set            nova:{ns}:held:<wid>
  KEYS[4]  fleet zset          nova:{ns}:app:<app>:fleet
  KEYS[5]  app workers set     nova:{ns}:app:<app>:workers
  KEYS[6]  leases zset         nova:{ns}:leases
  KEYS[7]  alive zset          nova:{ns}:alive
  KEYS[8]  inflight hash       nova:{ns}:inflight
  KEYS[9]  failed zset         nova:{ns}:failed
  KEYS[10] finished zset       nova:{ns}:finished
  KEYS[11] meta hash           nova:{ns}:meta
  KEYS[12] events stream       nova:{ns}:events

  ARGV[1]  key prefix ("nova:{ns}:")
  ARGV[2]  worker id
  ARGV[3]  events MAXLEN (approximate, 1..10^9)
  ARGV[4..] the claim's arguments (claim_argv; Python: nova_queue/claim_args.py, ClaimArgs):
  ARGV[4]  app
  ARGV[5]  k: most tasks to lease (1..64)
  ARGV[6]  lease TTL (ms, 1..86400000)
  ARGV[7]  gap (ms, 0..86400000) after which a silent Redis opens a grace window
  ARGV[8]  reap limit per call (0..256; at most 256 leases released and workers removed
           per call in all)
  ARGV[9]  run-time limit floor (ms, 1..604800000) of a task whose job sets none
  ARGV[10] run-time limit factor (1..1000) x the predicted finish
  ARGV[11..] k to 64 fresh random attempt ids ([A-Za-z0-9_-]{1,64}), one per task; a call
           whose ARGV[11] equals the previous claim's is a retry (its reply was lost) and
           returns those leases

  Returns {code, now_ms, payload[, reason]}
    0 OK     payload = JSON list of leases {tid, job, index, input, cost, params,
             lease_gen, attempt_id, attempt, deadline_ms, predicted_s, run_deadline_ms,
             backup (true for a backup attempt)}
    2 WAIT   payload = retry-after hint (ms): faster workers will finish the work sooner
    3 EMPTY  payload = retry-after hint (ms): nothing pending and nothing in flight
    4 QUARANTINED  payload = retry-after hint (ms), reason = why the worker is quarantined
   -9 BAD_INPUT    {-9, message}: an argument is out of range; nothing was read or written
  -10 WORKER_LOST  the worker is not registered (or was declared lost): register again

  Bounds: the candidate scan reads k + 32 pending entries at most, the slow path weighs the
  256 fastest other workers, a retried claim visits at most 256 held tasks, the backup
  search 64 leases.
]]
--- @include "common"
--- @include "claim_argv"
--- @include "check_claim_argv"
--- @include "claim_tasks"

local argv = claim_argv(ARGV, 4, ARGV[1], ARGV[2],
  int_in(ARGV[3], 1, MAX_EVENTS_MAXLEN) and ARGV[3])
local bad = check_claim_argv(argv)
if bad then
  return bad_input(bad)
end
return claim_tasks({
  pending = KEYS[1], worker = KEYS[2], held = KEYS[3], fleet = KEYS[4], app_workers = KEYS[5],
  leases = KEYS[6], alive = KEYS[7], inflight = KEYS[8], failed = KEYS[9], finished = KEYS[10],
  meta = KEYS[11], events = KEYS[12],
}, argv)
