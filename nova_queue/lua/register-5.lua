--[[ register: a worker joins (or re-joins after being declared lost). Records its
  capability, marks it alive with a heartbeat, adds it to each app's worker set and,
  where its startup benchmark gives an estimate, to the app's fleet.

  KEYS[1] worker hash      nova:{ns}:worker:<wid>
  KEYS[2] heartbeat key    nova:{ns}:hb:<wid>
  KEYS[3] workers zset     nova:{ns}:workers
  KEYS[4] alive zset       nova:{ns}:alive
  KEYS[5] events stream    nova:{ns}:events

  ARGV[1] key prefix ("nova:{ns}:")
  ARGV[2] worker id
  ARGV[3] heartbeat TTL (ms)
  ARGV[4] events MAXLEN (approximate)
  ARGV[5] worker fields as a JSON object of strings (name, host, host_id, node_id, pid,
          backend, device, memory_total, memory_free, capability, gflops, ...)
  ARGV[6] apps, comma-separated
  ARGV[7] JSON object app -> {bench_s, load_s, cold_s} from the startup benchmark
          (seconds per cost unit, seconds, seconds); any may be missing

  Returns {0, rejoined} rejoined = 1 if the id was known before
]]
--- @include "common"

local worker_key, hb_key, workers_key, alive_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local prefix, wid, ttl_ms, apps = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[6]
local ctx = { prefix = prefix, events = KEYS[5], maxlen = ARGV[4] }
local now = now_ms()
local fields = cjson.decode(ARGV[5])
local bench = cjson.decode(ARGV[7])
local rejoined = redis.call('EXISTS', worker_key)

local args = {}
for name, value in pairs(fields) do
  args[#args + 1] = name
  args[#args + 1] = tostring(value)
end
if #args > 0 then
  redis.call('HSET', worker_key, unpack(args))
end
redis.call('HSET', worker_key, 'id', wid, 'apps', apps, 'state', 'idle', 'last_seen_ms', int(now),
  'busy_until_ms', int(now))
redis.call('HSETNX', worker_key, 'joined_ms', int(now))
redis.call('HDEL', worker_key, 'left_ms')
redis.call('ZADD', workers_key, 'NX', now, wid)
redis.call('ZADD', alive_key, now + ttl_ms, wid)
redis.call('SET', hb_key, '1', 'PX', ttl_ms)
for app in string.gmatch(apps, '[^,]+') do
  redis.call('SADD', prefix .. 'app:' .. app .. ':workers', wid)
  local b = bench[app]
  if type(b) == 'table' then
    if tonumber(b.bench_s) then
      redis.call('HSET', worker_key, 'bench:' .. app, num(tonumber(b.bench_s)))
    end
    if tonumber(b.load_s) then
      redis.call('HSET', worker_key, 'load:' .. app, num(tonumber(b.load_s)))
    end
    if tonumber(b.cold_s) then
      redis.call('HSET', worker_key, 'cold:' .. app, num(tonumber(b.cold_s)))
    end
  end
  local w = redis.call('HMGET', worker_key, 'ema:' .. app, 'n:' .. app, 'bench:' .. app)
  local estimate = ((tonumber(w[2]) or 0) > 0 and tonumber(w[1])) or tonumber(w[3])
  if estimate then
    redis.call('ZADD', prefix .. 'app:' .. app .. ':fleet', num(estimate), wid)
  end
end
emit(ctx, 'worker_joined', 'worker', wid, 'name', fields.name or '', 'backend',
  fields.backend or '', 'host', fields.host or '', 'apps', apps, 'rejoined', rejoined)
return { 0, rejoined }
