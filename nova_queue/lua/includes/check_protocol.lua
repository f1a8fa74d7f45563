--[[ check_protocol: the namespace's protocol version (meta's field `protocol`) against this
  script's, PROTOCOL.VERSION (nova_queue/protocol.py, folded in at load: a constant, no cost
  per call). A namespace without the field gets this script's version; another version ends
  the script with the error reply "PROTOCOL_MISMATCH <namespace's> <script's>" (Python:
  ProtocolMismatchError). Call it before the first write: an error reply does not undo writes.
  recorded: the field as the caller already read it (false when missing), or nil to read it
  here (one HGET).
]]
local function check_protocol(meta_key, recorded)
  if recorded == nil then
    recorded = redis.call('HGET', meta_key, 'protocol')
  end
  if tonumber(recorded) == PROTOCOL.VERSION then
    return
  end
  if not recorded then
    redis.call('HSET', meta_key, 'protocol', PROTOCOL.VERSION)
    return
  end
  local shown = (string.gsub(string.sub(recorded, 1, 16), '%s', '_'))
  error({ err = 'PROTOCOL_MISMATCH ' .. shown .. ' ' .. PROTOCOL.VERSION })
end
