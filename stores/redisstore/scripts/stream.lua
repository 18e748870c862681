#!lua flags=no-writes
-- stream reads a range of a run's stream with the stream's length and
-- state and the run's status, at one moment (ReadStream).
-- KEYS[1]: the run hash, KEYS[2]: the stream's values, KEYS[3]: the
-- run's stream metadata.
-- ARGV[1]: prefix, ARGV[2]: clock (unused); ARGV[3]: stream name,
-- ARGV[4] and ARGV[5]: the first and last offset to read.
-- Reply: {OK, run status, length, encoded stream state ("" for a stream
-- never written), {encoded values}} | {NOTFOUND}.
local function main()
  local st = redis.call('HGET', KEYS[1], 'st')
  if not st then return {'NOTFOUND'} end
  local vals = redis.call('LRANGE', KEYS[2], ARGV[4], ARGV[5])
  return {'OK', st, redis.call('LLEN', KEYS[2]), redis.call('HGET', KEYS[3], ARGV[3]) or '', vals}
end
