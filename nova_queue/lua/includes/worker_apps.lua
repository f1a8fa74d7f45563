--[[ worker_apps: the apps of a worker's `apps` field (comma-separated), at most MAX_APPS
  (the field is writable, so its length is not trusted).
]]
--- @include "common"
local function worker_apps(field)
  local apps = {}
  for app in string.gmatch(field or '', '[^,]+') do
    if #apps >= MAX_APPS then
      break
    end
    apps[#apps + 1] = app
  end
  return apps
end
