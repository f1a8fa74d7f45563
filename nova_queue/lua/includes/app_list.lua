--[[ app_list: a comma list of at most MAX_APPS app names as {app, ...}, or nil. ]]
--- @include "common"
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
