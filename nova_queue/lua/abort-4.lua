--[[ abort: deletes a job that was never published (its enqueue failed part way), up to
  `count` of its tasks per call (lua/includes/delete_staged.lua).

  KEYS[1] job hash         nova:{ns}:job:<job>
  KEYS[2] staging zset     nova:{ns}:staging
  KEYS[3] stage zset       nova:{ns}:stage:<job>
  KEYS[4] meta hash        nova:{ns}:meta

  ARGV[1] key prefix ("nova:{ns}:")
  ARGV[2] job id
  ARGV[3] count: most task keys to delete in this call (1..2000)

  Returns {code, tasks left}
    0  OK (tasks left = 0: the job is gone)
   -9  BAD_INPUT {-9, message}: invalid job id, count or KEYS (nothing written)
  -11  BAD_STATE (the job was published; it cannot be aborted)
  or the error reply PROTOCOL_MISMATCH (check_protocol): nothing written
]]
--- @include "common"
--- @include "checks"
--- @include "check_protocol"
--- @include "delete_staged"

local job_key, staging_key, stage_key = KEYS[1], KEYS[2], KEYS[3]
local prefix, job_id, count = ARGV[1], ARGV[2], int_in(ARGV[3], 1, MAX_VISIT)
if not is_job_id(job_id) or not count
    or not keys_are(prefix, KEYS, { 'job:' .. job_id, 'staging', 'stage:' .. job_id,
      'meta' }) then
  return bad_input('invalid job id or count (1..' .. MAX_VISIT .. '), or KEYS that do not match')
end
check_protocol(KEYS[4])
local state = redis.call('HGET', job_key, 'state')
if not state then
  redis.call('ZREM', staging_key, job_id)
  redis.call('UNLINK', stage_key)
  return { CODE.OK, 0 }
end
if state ~= 'staging' then
  return { CODE.BAD_STATE, 'job ' .. job_id .. ' is ' .. state }
end
local _, left = delete_staged(prefix, staging_key, job_key, job_id, count)
return { CODE.OK, left }
