--[[ reap: requeues leases whose deadline passed and releases the leases of workers
  whose heartbeat expired (marking them lost); also deletes abandoned staging jobs.
  Claim and renew run the same sweep lazily, so no coordinator process is needed;
  this script lets a CLI or monitor run it on its own. Nothing is reaped inside a
  grace window opened after Redis was unreachable.

  KEYS[1] leases zset      nova:{ns}:leases
  KEYS[2] alive zset       nova:{ns}:alive
  KEYS[3] inflight hash    nova:{ns}:inflight
  KEYS[4] failed zset      nova:{ns}:failed
  KEYS[5] finished zset    nova:{ns}:finished
  KEYS[6] meta hash        nova:{ns}:meta
  KEYS[7] events stream    nova:{ns}:events
  KEYS[8] staging zset     nova:{ns}:staging

  ARGV[1] key prefix ("nova:{ns}:")
  ARGV[2] lease TTL (ms, 1..86400000)
  ARGV[3] gap (ms, 0..86400000) after which a silent Redis opens a grace window
  ARGV[4] events MAXLEN (approximate, 1..10^9)
  ARGV[5] limit per kind (0..256): lost workers, expired leases, staged tasks deleted; at
          most 256 leases released and workers removed per call in all
  ARGV[6] age (ms, >= 0) after which a staging job counts as abandoned

  Returns {0, workers lost, leases expired, staged tasks deleted}
    or {-9, message} (BAD_INPUT): an argument or KEYS is invalid (nothing written)
]]
--- @include "common"
--- @include "checks"
--- @include "tick"
--- @include "reap"
--- @include "delete_staged"

local prefix = ARGV[1]
local ttl_ms, gap_ms = int_in(ARGV[2], 1, MAX_TTL_MS), int_in(ARGV[3], 0, MAX_TTL_MS)
local limit, age_ms = int_in(ARGV[5], 0, MAX_REAP), int_in(ARGV[6], 0, 1e15)
if not ttl_ms or not gap_ms or not limit or not age_ms or not int_in(ARGV[4], 1, MAX_EVENTS_MAXLEN)
    or not keys_are(prefix, KEYS, { 'leases', 'alive', 'inflight', 'failed', 'finished', 'meta',
      'events', 'staging' }) then
  return bad_input('lease TTL, gap, events MAXLEN, limit or age out of range, '
    .. 'or KEYS that do not match')
end
local ctx = {
  prefix = prefix, leases = KEYS[1], alive = KEYS[2], inflight = KEYS[3], failed = KEYS[4],
  finished = KEYS[5], meta = KEYS[6], events = KEYS[7], maxlen = ARGV[4], budget = MAX_RELEASES,
}
local staging_key = KEYS[8]
local now = now_ms()
local grace = tick(ctx, now, gap_ms, ttl_ms)
local workers, leases = reap(ctx, now, grace, limit)

-- abandoned staging jobs: delete up to `limit` of their tasks per call
local deleted = 0
local old = redis.call('ZRANGEBYSCORE', staging_key, '-inf', now - age_ms, 'LIMIT', 0, 1)
for _, job_id in ipairs(old) do
  if is_job_id(job_id) then
    deleted = delete_staged(prefix, staging_key, prefix .. 'job:' .. job_id, job_id, limit)
  else
    redis.call('ZREM', staging_key, job_id) -- not a job id (written by hand)
  end
end
return { CODE.OK, workers, leases, deleted }
