--[[ check_commit_report: what is wrong with the lease holder's report (checked after the
  fence, before anything is written), or nil: the result key names this very lease
  (nova_queue/keys.py, result_key), the numbers are in range, the provenance is a JSON
  object, an inline result is a string of at most MAX_INLINE_BYTES. c: commit_argv's fields.
]]
--- @include "common"
local function check_commit_report(c, job_id, index)
  local head = 'jobs/' .. job_id .. '/results/' .. string.format('%05d', tonumber(index))
    .. '-g' .. c.gen .. '-' .. c.attempt_id .. '.'
  local key = c.result_key
  if type(key) ~= 'string' or #key > #head + 16 or string.find(key, head, 1, true) ~= 1
      or not string.find(key, '^[A-Za-z0-9]+$', #head + 1) then
    return 'the result key must be ' .. head .. '<ext>'
  end
  if not c.run_s then
    return 'run_s must be a number from 0 to ' .. MAX_RUN_S
  end
  if (c.warm ~= '0' and c.warm ~= '1') or not c.alpha or c.alpha <= 0 then
    return 'warm must be 0 or 1 and the moving-average weight in (0, 1]'
  end
  local meta = c.provenance
  if type(meta) ~= 'string' or #meta > MAX_META_BYTES or string.sub(meta, 1, 1) ~= '{' then
    return 'provenance must be a JSON object of at most ' .. MAX_META_BYTES .. ' bytes'
  end
  if type(c.inline) ~= 'string' or #c.inline > MAX_INLINE_BYTES then
    return 'an inline result must be at most ' .. MAX_INLINE_BYTES .. ' bytes'
  end
  return nil
end
