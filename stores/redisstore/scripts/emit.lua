-- emit delivers an event to every run waiting on a topic in any case of
-- its wait (Emit).
-- KEYS[1]: the topic's wait set, which holds the runs with a case on it.
-- ARGV[1]: prefix, ARGV[2]: clock; ARGV[3]: topic, ARGV[4]: marked payload,
-- ARGV[5]: operation ID (a repeated call returns the first reply).
-- Reply: the IDs of the runs delivered to, sorted.
local function main()
  local prev = once_get(ARGV[5])
  if prev then return prev end
  local ids = redis.call('SMEMBERS', KEYS[1])
  table.sort(ids)
  local out = {}
  for _, id in ipairs(ids) do
    local key, kind = wait_case(rkey(id), ARGV[3])
    if key then
      deliver(id, key, kind, ARGV[4])
      out[#out + 1] = id
    else
      redis.call('SREM', KEYS[1], id)
    end
  end
  if #out == 0 then return out end
  return once_put(ARGV[5], out)
end
