--[[ complete: commits a task's result, fenced by worker, lease_gen and attempt_id.

  A report that does not hold the current lease is rejected and recorded as a
  stale_rejected event; the committed task never changes. Replaying the same commit
  (its reply was lost) answers ALREADY. Warm runs update the worker's moving average
  of seconds per cost unit for the app; a cold run (first after a load) is kept apart
  as compile/warm-up time. A task with a backup attempt is settled by its first commit
  (the other attempt is stale from then on: backup_won / backup_lost); the workers the
  task failed on before are blamed, and quarantined after ARGV[12] such failures.

  KEYS[1]  task hash        nova:{ns}:task:<job>:<index>
  KEYS[2]  job hash         nova:{ns}:job:<job>
  KEYS[3]  worker hash      nova:{ns}:worker:<wid>
  KEYS[4]  held set         nova:{ns}:held:<wid>
  KEYS[5]  fleet zset       nova:{ns}:app:<app>:fleet
  KEYS[6]  leases zset      nova:{ns}:leases
  KEYS[7]  alive zset       nova:{ns}:alive
  KEYS[8]  inflight hash    nova:{ns}:inflight
  KEYS[9]  failed zset      nova:{ns}:failed
  KEYS[10] finished zset    nova:{ns}:finished
  KEYS[11] events stream    nova:{ns}:events

  ARGV[1]  key prefix ("nova:{ns}:")
  ARGV[2]  worker id
  ARGV[3]  task id ("<job>:<index>")
  ARGV[4]  lease_gen
  ARGV[5]  attempt_id
  ARGV[6]  result key in the store: exactly jobs/<job>/results/<index:05d>-g<lease_gen>-
           <attempt_id>.<ext> (ext [A-Za-z0-9]{1,16}; nova_queue/keys.py, result_key)
  ARGV[7]  run time (s) of this task, 0..604800
  ARGV[8]  warm: "1" steady-state run, "0" first run after a load
  ARGV[9]  moving-average weight of the new sample (0 < alpha <= 1)
  ARGV[10] events MAXLEN (approximate, 1..10^9)
  ARGV[11] provenance metadata (JSON object of at most 64 KiB, stored as is)
  ARGV[12] quarantine after (1..1000): a worker whose failed tasks succeed elsewhere this
           many times in its failure streak is quarantined (blame_others)
  ARGV[13] quarantine cool-down (ms, 1..86400000)
  ARGV[14] the result itself when it is held in Redis (1 to 65536 bytes, written to the
           field data of nova:{ns}:inline:<task id> when the commit holds; the store holds
           nothing under ARGV[6]), or "" when the store holds it under ARGV[6]

  Checks: sizes, KEYS[1..2] and MAXLEN before anything else; the fence next (a stale
  report is rejected as stale whatever else it carries); then the holder's result key,
  numbers and metadata, before anything is written.

  Returns {code, job_finished}
    0  OK           job_finished = 1 if this commit finished the job
    1  ALREADY      this exact commit had already taken effect
   -1  UNKNOWN_TASK
   -2  NOT_LEASED   (stale: task is pending, failed, cancelled, or done by another lease)
   -3  WRONG_WORKER (stale)
   -4  LEASE_GEN_MISMATCH (stale)
   -5  ATTEMPT_MISMATCH (stale)
   -6  JOB_CANCELLED (the task is now cancelled)
   -9  BAD_INPUT    {-9, message}: nothing was written
]]
--- @include "common"
--- @include "commit_argv"
--- @include "complete_task"

return complete_task({
  task = KEYS[1], job = KEYS[2], worker = KEYS[3], held = KEYS[4], fleet = KEYS[5],
  leases = KEYS[6], alive = KEYS[7], inflight = KEYS[8], failed = KEYS[9], finished = KEYS[10],
  events = KEYS[11],
}, commit_argv(ARGV))
