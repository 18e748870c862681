-- putcatalog records workflow and event types, replacing earlier records
-- of the same name or topic (PutCatalog).
-- KEYS[1]: the catalog's workflows hash, KEYS[2]: its events hash.
-- ARGV[1]: prefix, ARGV[2]: clock (unused); ARGV[3]: the number n of
-- workflow types, ARGV[4 .. 3+2n]: name and encoding of each, then topic
-- and encoding of each event type.
-- Reply: {OK}.
local function main()
  local n = tonumber(ARGV[3])
  if n > 0 then redis.call('HSET', KEYS[1], unpack(ARGV, 4, 3 + 2 * n)) end
  if #ARGV > 3 + 2 * n then redis.call('HSET', KEYS[2], unpack(ARGV, 4 + 2 * n)) end
  return {'OK'}
end
