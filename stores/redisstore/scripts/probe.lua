-- probe is the floor under every script of the store: one EVALSHA round
-- trip that increments one counter (ProbeCommits measures the server's
-- ceiling with it).
-- KEYS[1]: the probe's counter.
-- ARGV[1]: prefix, ARGV[2]: clock (neither is read).
-- Reply: the counter's new value.
local function main()
  return redis.call('INCR', KEYS[1])
end
