-- putcatalog records workflow and event types and queues, replacing
-- earlier records of the same name or topic (PutCatalog).
-- KEYS[1]: the catalog's workflows hash, KEYS[2]: its events hash, KEYS[3]:
-- its queues hash.
-- ARGV[1]: prefix, ARGV[2]: clock (unused); ARGV[3]: the number n of
-- workflow types, ARGV[4]: the number m of event types, then name and
-- encoding of each workflow type, topic and encoding of each event type,
-- and name and encoding of each queue.
-- Reply: {OK}.
local function main()
  local n, m = tonumber(ARGV[3]), tonumber(ARGV[4])
  local e = 5 + 2 * n
  local q = e + 2 * m
  if n > 0 then redis.call('HSET', KEYS[1], unpack(ARGV, 5, e - 1)) end
  if m > 0 then redis.call('HSET', KEYS[2], unpack(ARGV, e, q - 1)) end
  if #ARGV >= q then redis.call('HSET', KEYS[3], unpack(ARGV, q)) end
  return {'OK'}
end
