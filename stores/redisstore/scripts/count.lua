#!lua flags=no-writes
-- count reads the sizes of listing indexes in one consistent read
-- (CountRuns): the status indexes of all runs or of one workflow.
-- KEYS: the indexes.
-- ARGV[1]: prefix, ARGV[2]: clock (unused).
-- Reply: the size of each index, in KEYS order.
local function main()
  local out = {}
  for i, k in ipairs(KEYS) do
    out[i] = redis.call('ZCARD', k)
  end
  return out
end
