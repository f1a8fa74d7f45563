--[[ deregister: a worker leaves gracefully. Leases it still holds go back to pending
  without using an attempt (at most 256 per call; a worker holds a few); it leaves every
  app's worker set and fleet.

  KEYS[1] worker hash      nova:{ns}:worker:<wid>
  KEYS[2] held set         nova:{ns}:held:<wid>
  KEYS[3] leases zset      nova:{ns}:leases
  KEYS[4] alive zset       nova:{ns}:alive
  KEYS[5] inflight hash    nova:{ns}:inflight
  KEYS[6] failed zset      nova:{ns}:failed
  KEYS[7] finished zset    nova:{ns}:finished
  KEYS[8] events stream    nova:{ns}:events
  KEYS[9] meta hash        nova:{ns}:meta

  ARGV[1] key prefix ("nova:{ns}:")
  ARGV[2] worker id
  ARGV[3] events MAXLEN (approximate, 1..10^9)

  Returns {0, leases released}; {-10, 0} if the worker was not registered;
  {-9, message} (BAD_INPUT) for an invalid worker id, MAXLEN or KEYS (nothing written);
  the error reply PROTOCOL_MISMATCH (check_protocol): the namespace speaks another protocol
]]
--- @include "common"
--- @include "checks"
--- @include "check_protocol"
--- @include "remove_worker"

local prefix, wid = ARGV[1], ARGV[2]
if not is_name(wid, 128) or not int_in(ARGV[3], 1, MAX_EVENTS_MAXLEN)
    or not keys_are(prefix, KEYS, { 'worker:' .. wid, 'held:' .. wid, 'leases', 'alive',
      'inflight', 'failed', 'finished', 'events', 'meta' }) then
  return bad_input('invalid worker id or events MAXLEN, or KEYS that do not match them')
end
local ctx = {
  prefix = prefix, leases = KEYS[3], alive = KEYS[4], inflight = KEYS[5], failed = KEYS[6],
  finished = KEYS[7], events = KEYS[8], maxlen = ARGV[3], budget = MAX_RELEASES,
}
check_protocol(KEYS[9])
if redis.call('EXISTS', KEYS[1]) == 0 then
  return { CODE.WORKER_LOST, 0 }
end
local now = now_ms()
return { CODE.OK, remove_worker(ctx, wid, now, 'stopped', KEYS[2]) }
