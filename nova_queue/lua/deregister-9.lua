--[[ deregister: a worker leaves gracefully. Leases it still holds go back to pending
  without using an attempt; it leaves every app's worker set and fleet.

  KEYS[1] worker hash      nova:{ns}:worker:<wid>
  KEYS[2] held set         nova:{ns}:held:<wid>
  KEYS[3] heartbeat key    nova:{ns}:hb:<wid>
  KEYS[4] leases zset      nova:{ns}:leases
  KEYS[5] alive zset       nova:{ns}:alive
  KEYS[6] inflight hash    nova:{ns}:inflight
  KEYS[7] failed zset      nova:{ns}:failed
  KEYS[8] finished zset    nova:{ns}:finished
  KEYS[9] events stream    nova:{ns}:events

  ARGV[1] key prefix ("nova:{ns}:")
  ARGV[2] worker id
  ARGV[3] events MAXLEN (approximate)

  Returns {0, leases released}; {-10, 0} if the worker was not registered
]]
--- @include "common"
--- @include "release"

local prefix, wid = ARGV[1], ARGV[2]
local ctx = {
  prefix = prefix, leases = KEYS[4], alive = KEYS[5], inflight = KEYS[6], failed = KEYS[7],
  finished = KEYS[8], events = KEYS[9], maxlen = ARGV[3],
}
if redis.call('EXISTS', KEYS[1]) == 0 then
  return { -10, 0 }
end
local now = now_ms()
return { 0, remove_worker(ctx, wid, now, 'stopped', KEYS[2], KEYS[3]) }
