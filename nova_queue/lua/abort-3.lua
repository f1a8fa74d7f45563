--[[ abort: deletes a job that was never published (its enqueue failed part way),
  up to `count` of its tasks per call.

  KEYS[1] job hash         nova:{ns}:job:<job>
  KEYS[2] staging zset     nova:{ns}:staging
  KEYS[3] stage zset       nova:{ns}:stage:<job>

  ARGV[1] key prefix ("nova:{ns}:")
  ARGV[2] job id
  ARGV[3] count: most task keys to delete in this call

  Returns {code, tasks left}
    0  OK (tasks left = 0: the job is gone)
  -11  BAD_STATE (the job was published; it cannot be aborted)
]]
local job_key, staging_key, stage_key = KEYS[1], KEYS[2], KEYS[3]
local prefix, job_id, count = ARGV[1], ARGV[2], tonumber(ARGV[3])
local j = redis.call('HMGET', job_key, 'state', 'staged')
if not j[1] then
  redis.call('ZREM', staging_key, job_id)
  redis.call('DEL', stage_key)
  return { 0, 0 }
end
if j[1] ~= 'staging' then
  return { -11, 'job ' .. job_id .. ' is ' .. j[1] }
end
local staged = tonumber(j[2]) or 0
local stop = math.max(staged - count, 0)
for index = staged - 1, stop, -1 do
  redis.call('DEL', prefix .. 'task:' .. job_id .. ':' .. index)
end
if stop > 0 then
  redis.call('HSET', job_key, 'staged', stop)
  return { 0, stop }
end
redis.call('DEL', job_key, stage_key)
redis.call('ZREM', staging_key, job_id)
return { 0, 0 }
