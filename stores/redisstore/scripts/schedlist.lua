#!lua flags=no-writes
-- schedlist reads one page of schedules in one consistent read
-- (ListSchedules): by ID from the IDs index, or those due by a time from
-- the due index, by CheckAt (then ID).
-- KEYS[1]: the index: the IDs index or the due index.
-- ARGV[1]: prefix, ARGV[2]: clock (unused); ARGV[3]: "due" or "id",
-- ARGV[4]: the due time (µs) or the lexicographic start, ARGV[5]: how
-- many at most.
-- Reply: per schedule {id, HMGET of its rev, ca, ua, j}.
local function main()
  local ids
  if ARGV[3] == 'due' then
    ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[4], 'LIMIT', 0, tonumber(ARGV[5]))
  else
    ids = redis.call('ZRANGEBYLEX', KEYS[1], ARGV[4], '+', 'LIMIT', 0, tonumber(ARGV[5]))
  end
  local out = {}
  for _, id in ipairs(ids) do
    out[#out + 1] = {id, redis.call('HMGET', schedkey(id), 'rev', 'ca', 'ua', 'j')}
  end
  return out
end
