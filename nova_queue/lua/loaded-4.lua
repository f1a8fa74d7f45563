--[[ loaded: a worker loaded a model for an app (its runner's prepare reported a load) and
  says so: it holds that model warm from now on (claims prefer that model's jobs for it, and
  count its load time before a job of another model), how long the load took (load:<app>,
  the moving average of its loads) and how many it did (model_loads); the load is no longer
  in progress (loading:<app>, which loading-4 wrote, goes). Emits model_loaded.

  KEYS[1] worker hash      nova:{ns}:worker:<wid>
  KEYS[2] alive zset       nova:{ns}:alive
  KEYS[3] events stream    nova:{ns}:events
  KEYS[4] meta hash        nova:{ns}:meta (the protocol version: check_protocol)
  (and, from the prefix and the app, nova:{ns}:app:<app>:warm: how many workers hold each
  model, what claims spread jobs by)

  ARGV[1] key prefix ("nova:{ns}:")
  ARGV[2] worker id
  ARGV[3] app
  ARGV[4] model key (what the app spec's model_key names; 1 to 128 of A-Z a-z 0-9 _ . : @ + / -)
  ARGV[5] load time (s, 0..604800)
  ARGV[6] moving-average weight of this load (0 < alpha <= 1)
  ARGV[7] events MAXLEN (approximate, 1..10^9)

  Returns {code, model_loads}
    0  OK
   -9  BAD_INPUT {-9, message}: nothing was written
  -10  WORKER_LOST: the worker is not registered (or was declared lost)
]]
--- @include "common"
--- @include "checks"
--- @include "set_warm"
--- @include "check_protocol"

local worker_key = KEYS[1]
local prefix, wid, app, model = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local load_s, alpha = num_in(ARGV[5], 0, MAX_RUN_S), num_in(ARGV[6], 0, 1)
if not is_name(wid, 128) or not is_name(app, 64) or type(model) ~= 'string' or #model > 128
    or not string.match(model, '^[A-Za-z0-9_.:@+/%-]+$') or not load_s or not alpha or alpha == 0
    or not int_in(ARGV[7], 1, MAX_EVENTS_MAXLEN)
    or not keys_are(prefix, KEYS, { 'worker:' .. wid, 'alive', 'events', 'meta' }) then
  return bad_input('invalid worker id, app, model, load time, weight or events MAXLEN, or KEYS')
end
check_protocol(KEYS[4])
if not redis.call('ZSCORE', KEYS[2], wid) then
  return { CODE.WORKER_LOST, 0 }
end
local warm, last_load, name, model_loads = unpack(redis.call('HMGET', worker_key,
  'warm:' .. app, 'load:' .. app, 'name', 'model_loads'))
set_warm(prefix, app, worker_key, warm, model)
local before = num_in(last_load, 0, MAX_RUN_S)
local loads = (tonumber(model_loads) or 0) + 1
redis.call('HSET', worker_key, 'load:' .. app, num(before and alpha * load_s + (1 - alpha) * before
  or load_s), 'model_loads', loads)
redis.call('HDEL', worker_key, 'loading:' .. app) -- loading-4's mark: the load is done
emit({ prefix = prefix, events = KEYS[3], maxlen = ARGV[7] }, 'model_loaded', 'worker', wid,
  'name', string.sub(name or '', 1, 200), 'app', app, 'model', model, 'load_s', num(load_s))
return { CODE.OK, loads }
