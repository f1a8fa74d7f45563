--[[ register: a worker joins (or re-joins after being declared lost). Records its
  capability, marks it alive until its heartbeat TTL, adds it to each app's worker set
  and, where its startup benchmark gives an estimate, to the app's fleet (never faster
  than the fleet's fastest measured worker: enter_fleet). It becomes the latest worker of
  its identity (ident_of: what precedes the id's last '.') and takes over the blame record
  of the identity's previous worker id (take_over_identity): re-registering under a new id
  clears no quarantine or failure streak. Its trust (set_trust) is its identity's too:
  the field `trust` of its fields asks for 'trusted' (the operator vouches: a direct
  worker's NOVA_TRUST, a gateway token's --trust) or 'new'. A worker that verifies
  (`verifier` 1) and one the operator vouches for that says which of its apps' results do
  not compare (`nocompare`) update the namespace's verification marks (note_verifier).

  KEYS[1] worker hash      nova:{ns}:worker:<wid>
  KEYS[2] workers zset     nova:{ns}:workers
  KEYS[3] alive zset       nova:{ns}:alive
  KEYS[4] events stream    nova:{ns}:events
  KEYS[5] meta hash        nova:{ns}:meta
  KEYS[6] idents hash      nova:{ns}:idents

  ARGV[1] key prefix ("nova:{ns}:")
  ARGV[2] worker id
  ARGV[3] heartbeat TTL (ms, 1..86400000)
  ARGV[4] events MAXLEN (approximate, 1..10^9)
  ARGV[5] worker fields as a JSON object (at most 64 KiB) of at most 64 strings or numbers
          (name, host, host_id, node_id, pid, backend, device, memory_total, memory_free,
          capability, gflops, trust, verifier, nocompare, ...); names [a-z][a-z0-9_]{0,31}, none of the fields the
          scripts own (id, apps, state, the counters and per-app estimates)
  ARGV[6] apps, comma-separated: at most 64 app names
  ARGV[7] JSON object (at most 64 KiB) app -> {bench_s, load_s, cold_s} from the startup
          benchmark (seconds per cost unit, seconds, seconds; finite, 0..1e12); any may be
          missing

  Returns {0, rejoined} rejoined = 1 if the id was known before;
  {-9, message} (BAD_INPUT): nothing was written;
  the error reply PROTOCOL_MISMATCH (check_protocol): the namespace speaks another protocol
]]
--- @include "common"
--- @include "checks"
--- @include "check_protocol"
--- @include "decode_object"
--- @include "worker_fields"
--- @include "app_list"
--- @include "bench_estimates"
--- @include "join_apps"
--- @include "take_over_identity"
--- @include "set_trust"
--- @include "note_verifier"

local worker_key, workers_key, alive_key = KEYS[1], KEYS[2], KEYS[3]
local prefix, wid, ttl_ms = ARGV[1], ARGV[2], int_in(ARGV[3], 1, MAX_TTL_MS)
local ctx = { prefix = prefix, events = KEYS[4], maxlen = ARGV[4] }
if not is_name(wid, 128) or not ttl_ms or not int_in(ARGV[4], 1, MAX_EVENTS_MAXLEN)
    or not keys_are(prefix, KEYS, { 'worker:' .. wid, 'workers', 'alive', 'events',
      'meta', 'idents' }) then
  return bad_input('invalid worker id, TTL or events MAXLEN, or KEYS that do not match them')
end
local fields, bench, apps = decode_object(ARGV[5]), decode_object(ARGV[7]), app_list(ARGV[6])
if not fields or not bench or not apps then
  return bad_input('worker fields and benchmarks must be JSON objects of at most '
    .. MAX_META_BYTES .. ' bytes, apps at most ' .. MAX_APPS .. ' app names')
end
local requested, nocompare = fields.trust, fields.nocompare -- the scripts' to write
fields.trust, fields.nocompare = nil, nil
local args, why = worker_fields(fields)
if not args then
  return bad_input(why)
end
local estimates, bad = bench_estimates(apps, bench)
if not estimates then
  return bad_input(bad)
end

check_protocol(KEYS[5])
local now = now_ms()
local rejoined = redis.call('EXISTS', worker_key)
if #args > 0 then
  redis.call('HSET', worker_key, unpack(args))
end
redis.call('HSET', worker_key, 'id', wid, 'apps', table.concat(apps, ','), 'state', 'idle',
  'last_seen_ms', int(now), 'busy_until_ms', int(now), 'protocol', PROTOCOL.VERSION)
redis.call('HSETNX', worker_key, 'joined_ms', int(now))
redis.call('HDEL', worker_key, 'left_ms')
take_over_identity(prefix, KEYS[6], worker_key, wid)
set_trust(prefix, worker_key, wid, requested)
note_verifier(KEYS[5], apps, fields.verifier == '1', nocompare,
  requested == nil or requested == 'trusted')
redis.call('ZADD', workers_key, 'NX', now, wid)
redis.call('ZADD', alive_key, now + ttl_ms, wid)
join_apps(prefix, worker_key, wid, apps, estimates,
  redis.call('HGET', worker_key, 'quarantined') == '1')
emit(ctx, 'worker_joined', 'worker', wid, 'name', fields.name or '', 'backend',
  fields.backend or '', 'host', fields.host or '', 'apps', table.concat(apps, ','),
  'rejoined', rejoined)
return { CODE.OK, rejoined }
