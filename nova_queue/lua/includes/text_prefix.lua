--[[ text_prefix: the first `max` bytes of `s` (all of it if shorter), cut before a UTF-8
  character that would not fit whole (a character is at most 4 bytes).
]]
local function text_prefix(s, max)
  if #s <= max then
    return s
  end
  local cut = max
  for _ = 1, 3 do
    local b = string.byte(s, cut + 1)
    if b < 128 or b >= 192 then
      break -- byte cut + 1 starts a character: cut there
    end
    cut = cut - 1
  end
  return string.sub(s, 1, cut)
end
