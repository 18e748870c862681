-- steps reads a run's checkpoints and, when asked, its attempts, in one
-- consistent read (LoadCheckpoints, ListSteps).
-- KEYS[1]: the run hash, KEYS[2]: its checkpoints, KEYS[3]: its attempts.
-- ARGV[1]: prefix, ARGV[2]: clock (unused); ARGV[3]: "1" to read the
-- attempts too.
-- Reply: {NOTFOUND} | {OK, HGETALL of the checkpoints, the attempts}.
local function main()
  if redis.call('EXISTS', KEYS[1]) == 0 then return {'NOTFOUND'} end
  local atts = {}
  if ARGV[3] == '1' then atts = redis.call('LRANGE', KEYS[3], 0, -1) end
  return {'OK', redis.call('HGETALL', KEYS[2]), atts}
end
