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
  ARGV[2] lease TTL (ms)
  ARGV[3] gap (ms) after which a silent Redis opens a grace window
  ARGV[4] events MAXLEN (approximate)
  ARGV[5] limit per kind
  ARGV[6] age (ms) after which a staging job counts as abandoned

  Returns {0, workers lost, leases expired, staged tasks deleted}
]]
--- @include "common"
--- @include "clock"
--- @include "release"

local prefix, ttl_ms, limit = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[5])
local ctx = {
  prefix = prefix, leases = KEYS[1], alive = KEYS[2], inflight = KEYS[3], failed = KEYS[4],
  finished = KEYS[5], meta = KEYS[6], events = KEYS[7], maxlen = ARGV[4],
}
local staging_key = KEYS[8]
local now = now_ms()
local grace = tick(ctx, now, tonumber(ARGV[3]), ttl_ms)
local workers, leases = reap(ctx, now, grace, limit)

-- abandoned staging jobs: delete up to `limit` of their tasks per call
local deleted = 0
local old = redis.call('ZRANGEBYSCORE', staging_key, '-inf', now - tonumber(ARGV[6]), 'LIMIT', 0, 1)
for _, job_id in ipairs(old) do
  local job_key = prefix .. 'job:' .. job_id
  local staged = tonumber(redis.call('HGET', job_key, 'staged') or '0') or 0
  local stop = math.max(staged - limit, 0)
  for index = staged - 1, stop, -1 do
    redis.call('DEL', prefix .. 'task:' .. job_id .. ':' .. index)
    deleted = deleted + 1
  end
  if stop == 0 then
    redis.call('DEL', job_key, prefix .. 'stage:' .. job_id)
    redis.call('ZREM', staging_key, job_id)
  else
    redis.call('HSET', job_key, 'staged', stop)
  end
end
return { 0, workers, leases, deleted }
