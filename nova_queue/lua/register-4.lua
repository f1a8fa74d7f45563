--[[ register: a worker joins (or re-joins after being declared lost). Records its
  capability, marks it alive until its heartbeat TTL, adds it to each app's worker set
  and, where its startup benchmark gives an estimate, to the app's fleet.

  KEYS[1] worker hash      nova:{ns}:worker:<wid>
  KEYS[2] workers zset     nova:{ns}:workers
  KEYS[3] alive zset       nova:{ns}:alive
  KEYS[4] events stream    nova:{ns}:events

  ARGV[1] key prefix ("nova:{ns}:")
  ARGV[2] worker id
  ARGV[3] heartbeat TTL (ms, 1..86400000)
  ARGV[4] events MAXLEN (approximate, 1..10^9)
  ARGV[5] worker fields as a JSON object (at most 64 KiB) of at most 64 strings or numbers
          (name, host, host_id, node_id, pid, backend, device, memory_total, memory_free,
          capability, gflops, ...); names [a-z][a-z0-9_]{0,31}, none of the fields the
          scripts own (id, apps, state, the counters and per-app estimates)
  ARGV[6] apps, comma-separated: at most 64 app names
  ARGV[7] JSON object (at most 64 KiB) app -> {bench_s, load_s, cold_s} from the startup
          benchmark (seconds per cost unit, seconds, seconds; finite, 0..1e12); any may be
          missing

  Returns {0, rejoined} rejoined = 1 if the id was known before;
  {-9, message} (BAD_INPUT): nothing was written
]]
--- @include "common"
--- @include "checks"

-- fields written by the scripts, never by a worker's registration
local OWNED = {
  id = true, apps = true, state = true, joined_ms = true, left_ms = true, last_seen_ms = true,
  busy_until_ms = true, tasks_done = true, failures = true, oom = true, claims = true,
  last_claim = true,
}

local function decode_object(text)
  if type(text) ~= 'string' or #text > MAX_META_BYTES then
    return nil
  end
  local ok, value = pcall(cjson.decode, text)
  if ok and type(value) == 'table' then
    return value
  end
  return nil
end

-- {name, value, ...} for HSET, or nil, message
local function field_args(fields)
  local args, n = {}, 0
  for name, value in pairs(fields) do
    n = n + 1
    if n > MAX_FIELDS then
      return nil, 'at most ' .. MAX_FIELDS .. ' worker fields'
    end
    if type(name) ~= 'string' or not string.match(name, '^[a-z][a-z0-9_]*$') or #name > 32
        or OWNED[name] then
      return nil, 'invalid worker field name'
    end
    if type(value) ~= 'string' and type(value) ~= 'number' then
      return nil, 'worker field ' .. name .. ' must be a string or a number'
    end
    args[#args + 1] = name
    args[#args + 1] = type(value) == 'number' and num(value) or value
  end
  return args
end

-- {app, ...} from the comma list, or nil
local function app_list(text)
  if type(text) ~= 'string' or #text > MAX_APPS * 65 then
    return nil
  end
  local apps = {}
  for app in string.gmatch(text, '[^,]+') do
    if #apps >= MAX_APPS or not is_name(app, 64) then
      return nil
    end
    apps[#apps + 1] = app
  end
  return apps
end

local worker_key, workers_key, alive_key = KEYS[1], KEYS[2], KEYS[3]
local prefix, wid, ttl_ms = ARGV[1], ARGV[2], int_in(ARGV[3], 1, MAX_TTL_MS)
local ctx = { prefix = prefix, events = KEYS[4], maxlen = ARGV[4] }
if not is_name(wid, 128) or not ttl_ms or not int_in(ARGV[4], 1, MAX_EVENTS_MAXLEN)
    or not keys_are(prefix, KEYS, { 'worker:' .. wid, 'workers', 'alive', 'events' }) then
  return bad_input('invalid worker id, TTL or events MAXLEN, or KEYS that do not match them')
end
local fields, bench, apps = decode_object(ARGV[5]), decode_object(ARGV[7]), app_list(ARGV[6])
if not fields or not bench or not apps then
  return bad_input('worker fields and benchmarks must be JSON objects of at most '
    .. MAX_META_BYTES .. ' bytes, apps at most ' .. MAX_APPS .. ' app names')
end
local args, why = field_args(fields)
if not args then
  return bad_input(why)
end
local estimates = {} -- app -> {field, value, ...} from the benchmark
for _, app in ipairs(apps) do
  local b = bench[app]
  local e = {}
  if type(b) == 'table' then
    for _, name in ipairs({ 'bench', 'load', 'cold' }) do
      local v = b[name .. '_s']
      if v ~= nil and v ~= cjson.null then
        local x = num_in(v, 0, MAX_SPEED)
        if not x then
          return bad_input(app .. ': ' .. name .. '_s must be a number from 0 to 1e12')
        end
        e[#e + 1], e[#e + 2] = name .. ':' .. app, num(x)
      end
    end
  end
  estimates[app] = e
end

local now = now_ms()
local rejoined = redis.call('EXISTS', worker_key)
if #args > 0 then
  redis.call('HSET', worker_key, unpack(args))
end
redis.call('HSET', worker_key, 'id', wid, 'apps', table.concat(apps, ','), 'state', 'idle',
  'last_seen_ms', int(now), 'busy_until_ms', int(now))
redis.call('HSETNX', worker_key, 'joined_ms', int(now))
redis.call('HDEL', worker_key, 'left_ms')
redis.call('ZADD', workers_key, 'NX', now, wid)
redis.call('ZADD', alive_key, now + ttl_ms, wid)
for _, app in ipairs(apps) do
  redis.call('SADD', prefix .. 'app:' .. app .. ':workers', wid)
  if #estimates[app] > 0 then
    redis.call('HSET', worker_key, unpack(estimates[app]))
  end
  local w = redis.call('HMGET', worker_key, 'ema:' .. app, 'n:' .. app, 'bench:' .. app)
  local ema = num_in(w[1], MIN_SPEED, MAX_SPEED)
  local estimate = ((tonumber(w[2]) or 0) > 0 and ema) or num_in(w[3], MIN_SPEED, MAX_SPEED)
  if estimate then
    redis.call('ZADD', prefix .. 'app:' .. app .. ':fleet', num(estimate), wid)
  end
end
emit(ctx, 'worker_joined', 'worker', wid, 'name', fields.name or '', 'backend',
  fields.backend or '', 'host', fields.host or '', 'apps', table.concat(apps, ','),
  'rejoined', rejoined)
return { 0, rejoined }
