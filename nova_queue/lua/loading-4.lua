--[[ loading: a worker starts loading a model for an app (its runner's prepare is about to
  load the model of the job it claimed) and says so, so that the CLI and the demo can show
  "loading model on w1 (12 s)" instead of silence: loading:<app> on its hash is when it
  started (Redis ms) until loaded-4 records the load, or until this script is told "stop"
  (prepare loaded nothing after all, or failed). Emits model_loading on a start.

  KEYS[1] worker hash      nova:{ns}:worker:<wid>
  KEYS[2] alive zset       nova:{ns}:alive
  KEYS[3] events stream    nova:{ns}:events
  KEYS[4] meta hash        nova:{ns}:meta (the protocol version: check_protocol)

  ARGV[1] key prefix ("nova:{ns}:")
  ARGV[2] worker id
  ARGV[3] app
  ARGV[4] model key (as loaded-4's ARGV[4])
  ARGV[5] "start" | "stop"
  ARGV[6] events MAXLEN (approximate, 1..10^9)

  Returns {code, started_ms (0 for a stop)}
    0  OK
   -9  BAD_INPUT {-9, message}: nothing was written
  -10  WORKER_LOST: the worker is not registered (or was declared lost)
  or the error reply PROTOCOL_MISMATCH (check_protocol): nothing written
]]
--- @include "common"
--- @include "checks"
--- @include "check_protocol"

local worker_key = KEYS[1]
local prefix, wid, app, model, action = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
if not is_name(wid, 128) or not is_name(app, 64) or type(model) ~= 'string' or #model > 128
    or not string.match(model, '^[A-Za-z0-9_.:@+/%-]+$')
    or (action ~= 'start' and action ~= 'stop') or not int_in(ARGV[6], 1, MAX_EVENTS_MAXLEN)
    or not keys_are(prefix, KEYS, { 'worker:' .. wid, 'alive', 'events', 'meta' }) then
  return bad_input('invalid worker id, app, model, action or events MAXLEN, or KEYS')
end
check_protocol(KEYS[4])
if not redis.call('ZSCORE', KEYS[2], wid) then
  return { CODE.WORKER_LOST, 0 }
end
if action == 'stop' then
  redis.call('HDEL', worker_key, 'loading:' .. app)
  return { CODE.OK, 0 }
end
local now = now_ms()
redis.call('HSET', worker_key, 'loading:' .. app, int(now))
emit({ prefix = prefix, events = KEYS[3], maxlen = ARGV[6] }, 'model_loading', 'worker', wid,
  'name', string.sub(redis.call('HGET', worker_key, 'name') or '', 1, 200), 'app', app,
  'model', model)
return { CODE.OK, int(now) }
