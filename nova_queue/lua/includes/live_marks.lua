--[[ live_marks: a worker's `cannot_run` field (a JSON list of at most MAX_CANNOT_RUN marks
  {app, model, reason, since_ms, until_ms}: fail-10 writes one when the worker could not
  prepare a job of that app and model; a job without a model has model '') decoded: its
  marks still live at `now`, each checked and rebuilt from its known fields, and those of
  `app` as {model -> reason}. Anything else in the field (it is writable by hand) counts
  as no mark; a list is read up to MAX_CANNOT_RUN entries and MAX_MARKS_BYTES, and an
  entry whose model is not a job's (job_fields) is dropped.
]]
--- @include "common"
local function live_marks(raw, now, app)
  local list, of_app, ok, decoded = {}, {}, false, nil
  if type(raw) == 'string' and #raw <= MAX_MARKS_BYTES then
    ok, decoded = pcall(cjson.decode, raw)
  end
  if not ok or type(decoded) ~= 'table' then
    return list, of_app
  end
  for i = 1, MAX_CANNOT_RUN do
    local m = decoded[i]
    if type(m) ~= 'table' then
      break
    end
    local until_ms = int_in(m.until_ms, 0, 1e15)
    if until_ms and until_ms > now and is_name(m.app, 64) and type(m.model) == 'string'
        and #m.model <= 128 and string.match(m.model, '^[A-Za-z0-9_.:@+/%-]*$') then
      local reason = type(m.reason) == 'string'
        and string.gsub(string.sub(m.reason, 1, MAX_REASON_BYTES), '%c', ' ') or ''
      list[#list + 1] = { app = m.app, model = m.model, reason = reason,
        since_ms = int_in(m.since_ms, 0, 1e15) or until_ms, until_ms = until_ms }
      if m.app == app then
        of_app[m.model] = reason
      end
    end
  end
  return list, of_app
end
