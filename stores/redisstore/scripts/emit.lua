-- emit delivers an event to every run waiting on a topic (Emit).
-- KEYS[1]: the topic's wait set.
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
    if redis.call('HGET', rkey(id), 'wt') == ARGV[3] then
      deliver(id, ARGV[4])
      out[#out + 1] = id
    else
      redis.call('SREM', KEYS[1], id)
    end
  end
  if #out == 0 then return out end
  return once_put(ARGV[5], out)
end
