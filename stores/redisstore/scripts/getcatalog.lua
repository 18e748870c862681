#!lua flags=no-writes
-- getcatalog reads the catalog in one consistent read (GetCatalog).
-- KEYS[1]: the catalog's workflows hash, KEYS[2]: its events hash.
-- ARGV[1]: prefix, ARGV[2]: clock (unused).
-- Reply: {HGETALL of the workflows, HGETALL of the events}.
local function main()
  return {redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2])}
end
