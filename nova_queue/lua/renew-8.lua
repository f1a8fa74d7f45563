--[[ renew: the heartbeat. Refreshes the worker's liveness, lazily reaps what has expired,
  and extends every lease the worker still holds (renew_lease), never past an attempt's
  run deadline: an attempt at its run deadline times out here (an attempt is used, the task
  is left to other workers). Reports the leases it lost, and why: 'timeout', 'superseded'
  (another attempt of the task committed first), 'cancelled' (its job was), the kind its
  lease ended with ('expired', 'lost', ...) or 'lost'.

  KEYS[1] worker hash      nova:{ns}:worker:<wid>
  KEYS[2] leases zset      nova:{ns}:leases
  KEYS[3] alive zset       nova:{ns}:alive
  KEYS[4] inflight hash    nova:{ns}:inflight
  KEYS[5] failed zset      nova:{ns}:failed
  KEYS[6] finished zset    nova:{ns}:finished
  KEYS[7] meta hash        nova:{ns}:meta
  KEYS[8] events stream    nova:{ns}:events

  ARGV[1] key prefix ("nova:{ns}:")
  ARGV[2] worker id
  ARGV[3] lease TTL (ms, 1..86400000): the new deadline of the leases and the heartbeat
  ARGV[4] gap (ms, 0..86400000) after which a silent Redis opens a grace window
  ARGV[5] events MAXLEN (approximate, 1..10^9)
  ARGV[6] reap limit per call (0..256; at most 256 leases released and workers removed
          per call in all)
  ARGV[7..] triples: task id, lease_gen, attempt_id of each lease the worker holds (at most
          512 leases)

  Returns {code, now_ms, lost task ids, their reasons}
    0  OK
   -9  BAD_INPUT {-9, message}: nothing was read or written
  -10  WORKER_LOST: the worker is not registered or was declared lost; every lease is lost
]]
--- @include "common"
--- @include "checks"
--- @include "tick"
--- @include "reap"
--- @include "renew_lease"

local worker_key, leases_key, alive_key = KEYS[1], KEYS[2], KEYS[3]
local prefix, wid = ARGV[1], ARGV[2]
local ttl_ms, gap_ms = int_in(ARGV[3], 1, MAX_TTL_MS), int_in(ARGV[4], 0, MAX_TTL_MS)
local limit = int_in(ARGV[6], 0, MAX_REAP)
local held = #ARGV - 6
if not ttl_ms or not gap_ms or not limit or not int_in(ARGV[5], 1, MAX_EVENTS_MAXLEN) then
  return bad_input('lease TTL, gap, events MAXLEN or reap limit out of range')
end
if held % 3 ~= 0 or held > 3 * MAX_RENEW_LEASES then
  return bad_input('leases come in triples, at most ' .. MAX_RENEW_LEASES)
end
if not is_name(wid, 128) or not keys_are(prefix, KEYS, { 'worker:' .. wid, 'leases', 'alive',
    'inflight', 'failed', 'finished', 'meta', 'events' }) then
  return bad_input('invalid worker id, or KEYS that do not match the namespace and worker')
end
for i = 7, #ARGV, 3 do
  if not is_task_id(ARGV[i]) or not is_gen(ARGV[i + 1]) or not is_attempt_id(ARGV[i + 2]) then
    return bad_input('invalid lease (task id, lease_gen, attempt id)')
  end
end
local ctx = {
  prefix = prefix, leases = leases_key, alive = alive_key, inflight = KEYS[4],
  failed = KEYS[5], finished = KEYS[6], meta = KEYS[7], events = KEYS[8], maxlen = ARGV[5],
  budget = MAX_RELEASES,
}
local now = now_ms()
local grace = tick(ctx, now, gap_ms, ttl_ms)
reap(ctx, now, grace, limit)

local lost, reasons = {}, {}
if not redis.call('ZSCORE', alive_key, wid) then
  for i = 7, #ARGV, 3 do
    lost[#lost + 1], reasons[#reasons + 1] = ARGV[i], 'worker_lost'
  end
  return { CODE.WORKER_LOST, int(now), lost, reasons }
end

local deadline = now + ttl_ms
redis.call('ZADD', alive_key, deadline, wid)
redis.call('HSET', worker_key, 'last_seen_ms', int(now))

for i = 7, #ARGV, 3 do
  local ok, reason = renew_lease(ctx, ARGV[i], wid, ARGV[i + 1], ARGV[i + 2], now, deadline)
  if not ok then
    lost[#lost + 1], reasons[#reasons + 1] = ARGV[i], reason
  end
end
return { CODE.OK, int(now), lost, reasons }
