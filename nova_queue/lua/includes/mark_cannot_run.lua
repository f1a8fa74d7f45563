--[[ mark_cannot_run: the worker could not prepare a job (its app's runtime, its model, the
  device): its `cannot_run` list (live_marks) gets the mark {app, model (the job's; '' for
  none), reason (the first MAX_REASON_BYTES of the message, cut before a UTF-8 character
  that would not fit whole, control characters as spaces: the list stays within
  MAX_MARKS_BYTES), since_ms, until_ms = now +
  ttl_ms}. One mark per (app, model): a repeat renews its reason and end and keeps its
  since_ms; expired marks are dropped. Returns true once written (or when the worker has no
  record: nothing to mark), or false, writing nothing, when the list already holds
  MAX_CANNOT_RUN other live marks (fail-10 then counts the failure as an error, so a worker
  cannot hand tasks back for free past the cap).
]]
--- @include "live_marks"
local function mark_cannot_run(worker_key, job_key, app, message, now, ttl_ms)
  local id, cannot_run = unpack(redis.call('HMGET', worker_key, 'id', 'cannot_run'))
  if not id then
    return true
  end
  local model = redis.call('HGET', job_key, 'model') or ''
  local cut = math.min(#message, MAX_REASON_BYTES)
  for _ = 1, 3 do -- a character is at most 4 bytes: its continuation bytes are 128..191
    local b = cut < #message and string.byte(message, cut + 1)
    if not b or b < 128 or b >= 192 then
      break -- byte cut + 1 starts a character (or there is none): cut there
    end
    cut = cut - 1
  end
  local reason = string.gsub(string.sub(message, 1, cut), '%c', ' ')
  local mark = { app = app, model = model, reason = reason,
    since_ms = now, until_ms = now + ttl_ms }
  local kept = {}
  for _, m in ipairs((live_marks(cannot_run, now, app))) do
    if m.app == app and m.model == model then
      mark.since_ms = m.since_ms
    else
      kept[#kept + 1] = m
    end
  end
  if #kept >= MAX_CANNOT_RUN then
    return false
  end
  kept[#kept + 1] = mark
  redis.call('HSET', worker_key, 'cannot_run', cjson.encode(kept))
  return true
end
