--[[ renew: the heartbeat. Refreshes the worker's heartbeat key and liveness, lazily
  reaps what has expired, and extends every lease the worker still holds; reports the
  ones it lost (expired and reaped, re-leased, or its job cancelled).

  KEYS[1] worker hash      nova:{ns}:worker:<wid>
  KEYS[2] heartbeat key    nova:{ns}:hb:<wid>
  KEYS[3] leases zset      nova:{ns}:leases
  KEYS[4] alive zset       nova:{ns}:alive
  KEYS[5] inflight hash    nova:{ns}:inflight
  KEYS[6] failed zset      nova:{ns}:failed
  KEYS[7] finished zset    nova:{ns}:finished
  KEYS[8] meta hash        nova:{ns}:meta
  KEYS[9] events stream    nova:{ns}:events

  ARGV[1] key prefix ("nova:{ns}:")
  ARGV[2] worker id
  ARGV[3] lease TTL (ms), also the heartbeat TTL
  ARGV[4] gap (ms) after which a silent Redis opens a grace window
  ARGV[5] events MAXLEN (approximate)
  ARGV[6] reap limit per call
  ARGV[7..] triples: task id, lease_gen, attempt_id of each lease the worker holds

  Returns {code, now_ms, lost task ids}
    0  OK
  -10  WORKER_LOST: the worker is not registered or was declared lost; every lease is lost
]]
--- @include "common"
--- @include "clock"
--- @include "release"

local worker_key, hb_key, leases_key, alive_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local prefix, wid, ttl_ms = ARGV[1], ARGV[2], tonumber(ARGV[3])
local ctx = {
  prefix = prefix, leases = leases_key, alive = alive_key, inflight = KEYS[5],
  failed = KEYS[6], finished = KEYS[7], meta = KEYS[8], events = KEYS[9], maxlen = ARGV[5],
}
local now = now_ms()
local grace = tick(ctx, now, tonumber(ARGV[4]), ttl_ms)
reap(ctx, now, grace, tonumber(ARGV[6]))

local lost = {}
if not redis.call('ZSCORE', alive_key, wid) then
  for i = 7, #ARGV, 3 do
    lost[#lost + 1] = ARGV[i]
  end
  return { -10, int(now), lost }
end

redis.call('SET', hb_key, '1', 'PX', ttl_ms)
redis.call('ZADD', alive_key, now + ttl_ms, wid)
redis.call('HSET', worker_key, 'last_seen_ms', int(now))

local deadline = now + ttl_ms
for i = 7, #ARGV, 3 do
  local tid, gen, attempt_id = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local task_key = prefix .. 'task:' .. tid
  local t = redis.call('HMGET', task_key, 'state', 'worker', 'lease_gen', 'attempt_id')
  local job_state = redis.call('HGET', prefix .. 'job:' .. job_of(tid), 'state')
  if t[1] == 'leased' and t[2] == wid and t[3] == gen and t[4] == attempt_id
      and job_state ~= 'cancelled' then
    redis.call('HSET', task_key, 'deadline_ms', int(deadline))
    redis.call('ZADD', leases_key, 'XX', deadline, tid)
  else
    lost[#lost + 1] = tid
  end
end
return { 0, int(now), lost }
