--[[ quarantine: an admin quarantines a worker by hand, or lets a quarantined one back at
  once (without waiting for its cool-down and probe task). A worker quarantined by hand
  refuses claims like one the scripts quarantined (claim-12's QUARANTINED), probes after
  the cool-down, and gets the attempts of its current failure streak back.

  KEYS[1] worker hash      nova:{ns}:worker:<wid>
  KEYS[2] alive zset       nova:{ns}:alive
  KEYS[3] failed zset      nova:{ns}:failed
  KEYS[4] finished zset    nova:{ns}:finished
  KEYS[5] events stream    nova:{ns}:events
  KEYS[6] meta hash        nova:{ns}:meta

  ARGV[1] key prefix ("nova:{ns}:")
  ARGV[2] worker id
  ARGV[3] "release" | "quarantine"
  ARGV[4] reason (quarantine; at most 8192 bytes kept)
  ARGV[5] cool-down (ms, 1..86400000; quarantine)
  ARGV[6] events MAXLEN (approximate, 1..10^9)

  Returns {code, state}
    0  OK     state = "released" | "quarantined" | "unchanged" (not quarantined, or already)
   -9  BAD_INPUT {-9, message}: nothing was written
  -10  WORKER_LOST: no worker with that id is registered
  or the error reply PROTOCOL_MISMATCH (check_protocol): nothing written
]]
--- @include "common"
--- @include "checks"
--- @include "check_protocol"
--- @include "quarantine_worker"
--- @include "lift_quarantine"

local worker_key = KEYS[1]
local prefix, wid, action = ARGV[1], ARGV[2], ARGV[3]
local cooldown = int_in(ARGV[5], 1, MAX_COOLDOWN_MS)
if not is_name(wid, 128) or (action ~= 'release' and action ~= 'quarantine') or not cooldown
    or not int_in(ARGV[6], 1, MAX_EVENTS_MAXLEN)
    or not keys_are(prefix, KEYS, { 'worker:' .. wid, 'alive', 'failed', 'finished', 'events',
      'meta' }) then
  return bad_input('invalid worker id, action, cool-down or events MAXLEN, or KEYS that do not '
    .. 'match them')
end
local ctx = { prefix = prefix, alive = KEYS[2], failed = KEYS[3], finished = KEYS[4],
  events = KEYS[5], maxlen = ARGV[6] }
check_protocol(KEYS[6])
local id, quarantined = unpack(redis.call('HMGET', worker_key, 'id', 'quarantined'))
if not id then
  return { CODE.WORKER_LOST, 'no worker ' .. wid }
end
local now = now_ms()
if action == 'release' and quarantined == '1' then
  lift_quarantine(ctx, wid, now, 'admin')
  return { CODE.OK, 'released' }
end
if action == 'quarantine' and quarantined ~= '1' then
  quarantine_worker(ctx, wid, now, 'by an admin: ' .. string.sub(ARGV[4] or '', 1, 500), cooldown)
  return { CODE.OK, 'quarantined' }
end
return { CODE.OK, 'unchanged' }
