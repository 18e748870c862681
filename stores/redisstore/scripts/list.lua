-- list reads one page of a listing index (ListRuns).
-- KEYS[1]: the index.
-- ARGV[1]: prefix, ARGV[2]: clock (unused); ARGV[3]: the lexicographic
-- start, ARGV[4]: how many runs at most.
-- Reply: HGETALL of each run's hash, in index order.
local function main()
  local ids = redis.call('ZRANGEBYLEX', KEYS[1], ARGV[3], '+', 'LIMIT', 0, tonumber(ARGV[4]))
  local out = {}
  for i, id in ipairs(ids) do
    out[i] = redis.call('HGETALL', rkey(id))
  end
  return out
end
