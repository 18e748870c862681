#!lua flags=no-writes
-- getcatalog reads the catalog in one consistent read (GetCatalog).
-- KEYS[1]: the catalog's workflows hash, KEYS[2]: its events hash, KEYS[3]:
-- its queues hash.
-- ARGV[1]: prefix, ARGV[2]: clock (unused).
-- Reply: {HGETALL of the workflows, of the events, of the queues}.
local function main()
  return {redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2]), redis.call('HGETALL', KEYS[3])}
end
