-- removeworker deletes a worker's record, if any (RemoveWorker).
-- KEYS[1]: the workers hash, KEYS[2]: the workers' expiry set.
-- ARGV[1]: prefix, ARGV[2]: clock (unused); ARGV[3]: worker ID.
-- Reply: {OK}.
local function main()
  redis.call('HDEL', KEYS[1], ARGV[3])
  redis.call('ZREM', KEYS[2], ARGV[3])
  return {'OK'}
end
