#!lua flags=no-writes
-- streams lists a run's streams with their lengths and states
-- (ListStreams).
-- KEYS[1]: the run hash, KEYS[2]: the run's stream metadata.
-- ARGV[1]: prefix, ARGV[2]: clock (unused); ARGV[3]: run id.
-- Reply: {OK, name, length, encoded stream state, ...} | {NOTFOUND}.
local function main()
  if redis.call('EXISTS', KEYS[1]) == 0 then return {'NOTFOUND'} end
  local all = redis.call('HGETALL', KEYS[2])
  local out = {'OK'}
  for i = 1, #all, 2 do
    out[#out + 1] = all[i]
    out[#out + 1] = redis.call('LLEN', svkey(ARGV[3], all[i]))
    out[#out + 1] = all[i + 1]
  end
  return out
end
